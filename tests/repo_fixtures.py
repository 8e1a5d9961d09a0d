"""Fixture repositories for the repository-tracing tests: file contents, and `git init` + real commits."""

import subprocess
import textwrap
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Fixture",
    "GIT_AUTHOR_EMAIL": "fixture@example.org",
    "GIT_COMMITTER_NAME": "Fixture",
    "GIT_COMMITTER_EMAIL": "fixture@example.org",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
}


def git(path: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=path,
        env=GIT_ENV,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def write_files(path: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"))


def make_repo(path: Path, files: dict[str, str], message: str = "initial") -> str:
    """A git repository at `path` with `files` in one commit; returns the commit SHA."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    return commit(path, files, message)


def commit(path: Path, files: dict[str, str], message: str) -> str:
    write_files(path, files)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return git(path, "rev-parse", "HEAD")


# -- the acceptance package: a src-layout setuptools project with a pytest suite -------------------------
CALC = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "calc"
        version = "0.1.0"

        [tool.pytest.ini_options]
        testpaths = ["tests"]
        """,
    "src/calc/__init__.py": """
        from calc.ops import Stack, add, divide, mean
        """,
    "src/calc/ops.py": """
        def add(a, b):
            total = a + b
            return total


        def mean(values):
            total = 0
            for value in values:
                total = add(total, value)
            return total / len(values)


        def divide(a, b):
            return a / b


        def scale(values, *, factor=2):
            return [value * factor for value in values]


        class Stack:
            def __init__(self):
                self.items = []

            def push(self, item):
                self.items.append(item)
                return len(self.items)

            def pop(self):
                if not self.items:
                    raise IndexError("pop from an empty stack")
                return self.items.pop()
        """,
    "tests/conftest.py": """
        import pytest


        def helper_in_conftest(x):
            return x


        @pytest.fixture
        def stack():
            from calc import Stack
            return Stack()
        """,
    "tests/test_ops.py": """
        import pytest

        from calc import add, divide, mean
        from calc.ops import scale


        def test_add():
            assert add(2, 3) == 5


        def test_add_commutes():
            assert add(2, 3) == add(3, 2)


        def test_mean():
            assert mean([1, 2, 3]) == 2.0


        def test_divide_by_zero():
            with pytest.raises(ZeroDivisionError):
                divide(1, 0)


        def test_scale():
            assert scale([1, 2], factor=3) == [3, 6]


        def test_stack(stack):
            assert stack.push("a") == 1
            assert stack.pop() == "a"
            with pytest.raises(IndexError):
                stack.pop()
        """,
}

# The commit after the tag: `add` changes, so a trace of the tagged commit is recognisable.
CALC_LATER = {
    "src/calc/ops.py": CALC["src/calc/ops.py"].replace("total = a + b", "total = b + a"),
}


# -- repositories that go wrong, each in its own way -------------------------------------------------------
def _plain(module: str, tests: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A repository that is not a package: code in `lib/`, tests in `tests/` (default install: pytest only)."""
    files = {"lib/__init__.py": "", "lib/code.py": module, "tests/test_lib.py": tests}
    files.update(extra or {})
    return files


SIMPLE_LIB = """
    def double(x):
        return x * 2
    """

FAILING = _plain(
    SIMPLE_LIB,
    """
    from lib.code import double

    def test_passes():
        assert double(2) == 4

    def test_fails():
        assert double(3) == 7
    """,
)

SYNTAX_ERROR = _plain(
    SIMPLE_LIB,
    """
    from lib.code import double

    def test_double():
        assert double(1) == 2
    """,
    {
        "lib/broken.py": "def broken(:\n    return 1\n",
        "tests/test_broken.py": "from lib.broken import broken\n\ndef test_broken():\n    assert broken()\n",
    },
)

HANG = _plain(
    """
    import time

    def double(x):
        return x * 2

    def wait_forever():
        while True:
            time.sleep(0.01)
    """,
    """
    from lib.code import double, wait_forever

    def test_before():
        assert double(5) == 10

    def test_hangs():
        wait_forever()

    def test_after():
        assert double(6) == 12
    """,
)

SUITE_HANGS = _plain(
    SIMPLE_LIB,
    """
    from lib.code import double

    def test_double():
        assert double(1) == 2
    """,
    {
        "tests/conftest.py": """
        import time

        time.sleep(3600)  # collection never ends: only the trace phase's wall clock stops it
        """
    },
)


def socket_conftest(port: int) -> dict[str, str]:
    """A conftest that, when it is imported, connects to a server on the host's loopback (the sandbox's own
    loopback has none) and to a non-loopback address (the guard refuses it before any packet)."""
    return _plain(
        SIMPLE_LIB,
        """
        from lib.code import double

        def test_double():
            assert double(11) == 22  # a value no other repository of the job traces: its trace is its own
        """,
        {
            "tests/conftest.py": f"""
            import socket

            for address in (("127.0.0.1", {port}), ("192.0.2.1", 9)):
                try:
                    socket.create_connection(address, timeout=2).close()
                except OSError:
                    pass
            """
        },
    )


# A write into the repository lands in the run's own copy (and no run sees an earlier run's); one into the
# venv is refused.
WRITE_OUTSIDE = _plain(
    SIMPLE_LIB,
    """
    import os
    import sys

    from lib.code import double

    def test_writes_into_the_repository():
        target = os.path.join(os.path.dirname(__file__), "written.txt")
        assert not os.path.exists(target)  # the untraced run wrote it too, in its own copy
        with open(target, "w") as handle:
            handle.write("only in this run's copy")

    def test_writes_into_the_venv():
        with open(os.path.join(sys.prefix, "written.txt"), "w") as handle:
            handle.write("should not be here")

    def test_tmp_path_is_fine(tmp_path):
        (tmp_path / "ok.txt").write_text("fine")
        assert double(4) == 8
    """,
)

FORK_BOMB = _plain(
    SIMPLE_LIB,
    """
    import os

    from lib.code import double

    def test_fork_bomb():
        while True:
            os.fork()

    def test_after():
        assert double(7) == 14
    """,
)

FLOOD = _plain(
    SIMPLE_LIB,
    """
    from lib.code import double

    def test_flood():
        line = "x" * 10_000
        while True:
            print(line)

    def test_after():
        assert double(8) == 16
    """,
)

BAD_INSTALL = _plain(
    SIMPLE_LIB,
    """
    def test_nothing():
        pass
    """,
    {  # a package whose build fails: every fallback step installs the package, so none can install this one
        "setup.py": "raise RuntimeError('vendor/not-there is missing: this package does not build')\n",
        "requirements.txt": "./vendor/not-there\n",
    },
)


# -- classes whose __repr__, properties and dunders have side effects (the tracer must not call them) --------
SIDE_EFFECTS = _plain(
    """
    class Clock:
        \"\"\"A timer that advances every time it is read, like a test clock.\"\"\"

        def __init__(self):
            self.now = 0

        def read(self):
            self.now += 1
            return self.now


    class TTLCache:
        \"\"\"Entries expire `ttl` clock readings after they are set; __repr__ expires them first.\"\"\"

        def __init__(self, clock, ttl):
            self.clock = clock
            self.ttl = ttl
            self.entries = {}

        def expire(self):
            now = self.clock.read()
            for key in [key for key, (_, deadline) in self.entries.items() if deadline <= now]:
                del self.entries[key]

        def set(self, key, value):
            self.entries[key] = (value, self.clock.read() + self.ttl)
            return len(self.entries)

        def get(self, key):
            value, _ = self.entries[key]
            return value

        def __repr__(self):
            self.expire()
            return "TTLCache(%r)" % sorted(self.entries)

        def __len__(self):
            self.expire()
            return len(self.entries)


    def lookup(cache, key):
        found = cache.get(key)
        return found


    class Token:
        \"\"\"Counts every call of its repr, str, hash and equality.\"\"\"

        calls = 0

        def __init__(self, name):
            self.name = name

        def __repr__(self):
            Token.calls += 1
            return "Token(%r)" % self.name

        def __str__(self):
            Token.calls += 1
            return self.name

        def __hash__(self):
            Token.calls += 1
            return hash(self.name)

        def __eq__(self, other):
            Token.calls += 1
            return isinstance(other, Token) and other.name == self.name


    class TokenList(list):
        \"\"\"A list whose iteration and length are counted.\"\"\"

        def __iter__(self):
            Token.calls += 1
            return list.__iter__(self)

        def __len__(self):
            Token.calls += 1
            return list.__len__(self)


    def join_tokens(tokens):
        names = []
        for token in list.__iter__(tokens):
            names.append(token.name)
        unique = {id(token) for token in list.__iter__(tokens)}
        return "-".join(names), len(unique)


    class Config:
        \"\"\"Loads its data lazily on first access; counts loads and missing-attribute lookups.\"\"\"

        loads = 0
        misses = 0

        def __init__(self, path):
            self.path = path
            self._data = None

        @property
        def data(self):
            if self._data is None:
                Config.loads += 1
                self._data = {"path": self.path, "debug": False}
            return self._data

        def __getattr__(self, name):
            Config.misses += 1
            raise AttributeError(name)

        def __repr__(self):
            return "Config(%r)" % self.data


    class Failing(Exception):
        \"\"\"An exception whose __str__ and __repr__ have side effects.\"\"\"

        def __str__(self):
            Config.misses += 1
            return "failing"

        __repr__ = __str__


    def describe(config):
        path = config.path
        return path.upper()


    def fail_with(config):
        raise Failing(config.path)
    """,
    """
    import pytest

    from lib.code import Clock, Config, Failing, Token, TokenList, TTLCache, describe, fail_with, join_tokens, lookup


    def test_cache_entry_survives_until_its_deadline():
        cache = TTLCache(Clock(), ttl=2)
        assert cache.set("a", 1) == 1
        assert lookup(cache, "a") == 1
        assert cache.clock.now == 1  # only set() read the clock


    def test_tokens_are_never_printed_hashed_or_compared():
        tokens = TokenList([Token("a"), Token("b")])
        assert join_tokens(tokens) == ("a-b", 2)
        assert Token.calls == 0


    def test_config_is_never_loaded():
        config = Config("settings.toml")
        assert describe(config) == "SETTINGS.TOML"
        with pytest.raises(Failing):
            fail_with(config)
        assert (Config.loads, Config.misses) == (0, 0)
    """,
)

# A suite with one test that behaves differently under any tracer: the parity check must flag it.
TRACER_AWARE = _plain(
    SIMPLE_LIB,
    """
    import sys

    from lib.code import double


    def test_ordinary():
        assert double(2) == 4


    def test_depends_on_the_tracer():
        assert double(3) == 6
        assert sys.gettrace() is None
    """,
)


# -- suites that run as their own CI runs them (tests/stages/test_suites_run_as_their_ci_runs_them.py) -----
def _package(name: str, pytest_options: str, files: dict[str, str]) -> dict[str, str]:
    """A setuptools package `name` (src layout when its files are under src/) with `files` and the pytest
    options `pytest_options` in its pyproject.toml."""
    if any(path.startswith("src/") for path in files):
        layout = '[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    else:
        layout = f'[tool.setuptools]\npackages = ["{name}"]\n'
    pyproject = (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "0.1.0"\n\n{layout}\n[tool.pytest.ini_options]\n{pytest_options}\n'
    )
    return {"pyproject.toml": pyproject, **files}


# Class 5 and 6: a src-layout package whose version module exists only once it is built (as setuptools-scm's
# `write_to` does), and tests that write where they stand: beside themselves, in their cwd, a link.
WRITES_WHERE_IT_STANDS = _package(
    "genpkg",
    'testpaths = ["tests"]',
    {
        "src/genpkg/__init__.py": """
            from genpkg._version import version
            from genpkg.core import config_path, read_setting
            """,
        "src/genpkg/core.py": """
            import os


            def config_path(base):
                return os.path.join(base, "local.cfg")


            def read_setting(path):
                with open(path) as handle:
                    return handle.read().strip()
            """,
        "tests/test_writes.py": """
            import json
            import os

            from genpkg import config_path, read_setting, version


            def test_the_generated_version_imports():
                assert version == "1.2.3"


            def test_a_config_file_beside_the_tests():
                path = config_path(os.path.dirname(__file__))
                assert not os.path.exists(path)  # no earlier run's file
                with open(path, "w") as handle:
                    handle.write("fast\\n")
                assert read_setting(path) == "fast"


            def test_benchmarks_in_the_cwd():
                assert os.path.isfile("pyproject.toml")  # pytest runs at the repository's root
                os.makedirs(".benchmarks/run", exist_ok=False)
                with open(".benchmarks/run/0001.json", "w") as handle:
                    json.dump({"ok": True}, handle)


            def test_a_symlink_fixture():
                os.symlink("src", "linked-src")
                assert os.path.isfile(os.path.join("linked-src", "genpkg", "core.py"))
            """,
        "setup.py": """
            import os

            from setuptools import setup
            from setuptools.command.build_py import build_py


            class WriteVersion(build_py):
                def run(self):
                    with open(os.path.join("src", "genpkg", "_version.py"), "w") as handle:
                        handle.write('version = "1.2.3"\\n')
                    super().run()


            setup(cmdclass={"build_py": WriteVersion})
            """,
    },
)

# Class 7: tests that serve on the sandbox's own loopback.
LOOPBACK = _plain(
    """
    import socket


    def roundtrip(host, port, payload):
        with socket.create_connection((host, port), timeout=5) as client:
            client.sendall(payload)
            client.shutdown(socket.SHUT_WR)
            reply = b""
            while True:
                chunk = client.recv(1024)
                if not chunk:
                    return reply
                reply += chunk


    def send_datagram(host, port, payload):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            return sender.sendto(payload, (host, port))


    def pair_roundtrip(payload):
        left, right = socket.socketpair()
        with left, right:
            left.sendall(payload)
            return right.recv(1024)
    """,
    """
    import socket
    import threading

    from lib.code import pair_roundtrip, roundtrip, send_datagram


    def echo_once(server):
        connection, _ = server.accept()
        with connection:
            data = b""
            while True:
                chunk = connection.recv(1024)
                if not chunk:
                    break
                data += chunk
            connection.sendall(data)


    def test_echo_server_on_loopback():
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen()
            thread = threading.Thread(target=echo_once, args=(server,), daemon=True)
            thread.start()
            assert roundtrip("127.0.0.1", server.getsockname()[1], b"ping") == b"ping"
            thread.join(5)


    def test_datagram_on_loopback():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
            receiver.bind(("127.0.0.1", 0))
            assert send_datagram("127.0.0.1", receiver.getsockname()[1], b"dgram") == 5
            assert receiver.recv(64) == b"dgram"


    def test_socketpair():
        assert pair_roundtrip(b"pair") == b"pair"
    """,
)


def _stops_early(files: dict[str, str]) -> dict[str, str]:
    """Good test modules around one that fails to import and one with a failing test."""
    return {
        **files,
        "tests/test_a.py": "from stopper.code import double\n\ndef test_a1():\n    assert double(1) == 2\n\n"
        "def test_a2():\n    assert double(2) == 4\n",
        "tests/test_b_broken.py": "import not_installed_anywhere\n\ndef test_b():\n    pass\n",
        "tests/test_c.py": "from stopper.code import double\n\ndef test_c_fails():\n    assert double(3) == 7\n\n"
        "def test_c_after():\n    assert double(4) == 8\n",
        "tests/test_d.py": "from stopper.code import double\n\ndef test_d():\n    assert double(5) == 10\n",
    }


# Class 4: the repository's own options stop the run at the first collection error or failure.
STOPS_EARLY = _stops_early(
    _package(
        "stopper", 'addopts = "-x"\ntestpaths = ["tests"]', {"stopper/__init__.py": "", "stopper/code.py": SIMPLE_LIB}
    )
)
STOPS_EARLY_OTHERWISE = _stops_early(
    {
        "pytest.ini": "[pytest]\naddopts = --maxfail=1 --sw --lf --pdb\ntestpaths = tests\n",
        "stopper/__init__.py": "",
        "stopper/code.py": SIMPLE_LIB,
    }
)

# Class 8: doctests (doctest's runner saves sys.gettrace() and restores it with sys.settrace).
DOCTESTS = _package(
    "docpkg",
    'addopts = "--doctest-modules"\ntestpaths = ["docpkg", "tests"]',
    {
        "docpkg/__init__.py": "",
        "docpkg/text.py": '''
            def shout(word):
                """The word in capitals, with a mark.

                >>> shout("hi")
                'HI!'
                """
                return word.upper() + "!"


            def words(sentence):
                """
                >>> [shout(word) for word in words("a b")]
                ['A!', 'B!']
                """
                return sentence.split()
            ''',
        "tests/test_text.py": "from docpkg.text import shout\n\ndef test_shout():\n    assert shout('yo') == 'YO!'\n",
    },
)

# Class 10: tests that time themselves. `slow_sum(SLOW_N)` takes a few ms untraced and far more than
# Hypothesis's default deadline of 200 ms traced.
SLOW_N = 300_000
TIMED = _plain(
    """
    def slow_sum(n):
        total = 0
        for i in range(n):
            total += i % 7
        return total
    """,
    f"""
    import time
    from datetime import timedelta

    from hypothesis import given, settings, strategies as st

    from lib.code import slow_sum

    N = {SLOW_N}


    @given(st.integers(0, 1000))
    def test_inherits_the_suite_profile(k):
        assert slow_sum(N + k) >= 0


    @settings(max_examples=3)
    @given(st.integers(0, 1000))
    def test_own_settings_inherit_the_deadline(k):
        assert slow_sum(N + k) >= 0


    @settings(max_examples=2, deadline=timedelta(milliseconds=100))
    @given(st.integers(0, 1000))
    def test_own_deadline(k):
        assert slow_sum(N + k) >= 0


    def test_own_timeout():
        start = time.perf_counter()
        slow_sum(N)
        if time.perf_counter() - start > 0.15:
            raise TimeoutError("slow_sum took too long")


    def test_own_duration_assertion():
        start = time.perf_counter()
        slow_sum(N)
        assert time.perf_counter() - start < 0.15
    """,
    {
        "requirements-test.txt": "hypothesis\n",
        "tests/conftest.py": """
        from hypothesis import settings

        settings.register_profile("suite", max_examples=4)
        settings.load_profile("suite")
        """,
    },
)


# -- a repository whose tests call only generator functions (each test's calls are generators' and nothing else) --
GENERATORS = _plain(
    """
    def chunked(items, size):
        chunk = []
        for item in items:
            chunk.append(item)
            if len(chunk) == size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk


    def flatten(rows):
        for row in rows:
            yield from row


    def pairwise(items):
        iterator = iter(items)
        previous = next(iterator, None)
        for item in iterator:
            yield previous, item
            previous = item


    def evens(items):
        for item in items:
            if item % 2 == 0:
                yield item
        raise LookupError("no more even items")
    """,
    """
    import pytest

    from lib.code import chunked, evens, flatten, pairwise


    def test_chunked():
        assert list(chunked([1, 2, 3, 4, 5], 2)) == [[1, 2], [3, 4], [5]]


    def test_flatten_of_chunks():
        assert list(flatten(chunked(range(4), 3))) == [0, 1, 2, 3]


    def test_pairwise_partly():
        pairs = pairwise("abcd")
        assert next(pairs) == ("a", "b")
        assert next(pairs) == ("b", "c")


    def test_evens_raise_at_the_end():
        found = evens([1, 2, 3])
        assert next(found) == 2
        with pytest.raises(LookupError):
            next(found)
    """,
)
