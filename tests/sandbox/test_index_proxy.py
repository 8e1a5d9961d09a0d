"""The install phase reaches the package index and nothing else (issue 10, item 4), with each backend.

A hostile repository's `setup.py` runs while pip builds it and tries every way out: a TCP listener the test
starts on the host's loopback, an abstract unix socket the test creates on the host, an external host
directly, and the same targets through the proxy pip is given. Every attempt fails, the host's listeners
see no connection, the proxy's refusals are a failure row of the repository, and the repository still
installs — its build backend (setuptools) and pytest come from the index through the same proxy.
"""

import json
import os
import socket
import tempfile
import threading
import uuid

import pytest
import repo_fixtures as fixtures

from pipeline.engine.failures import Failures
from pipeline.engine.stats import StageCounters
from pipeline.sandbox.index_proxy import IndexProxy, index_hosts
from pipeline.sources.repo_manifest import RepoSpec
from pipeline.stages.repos.install import install_repo
from pipeline.stages.repos.trace import repo_input

PIP_CACHE = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")


class Listener:
    """A server on the host that counts the connections it accepts."""

    def __init__(self, family: int, address):
        self.server = socket.socket(family, socket.SOCK_STREAM)
        self.server.bind(address)
        self.server.listen()
        self.address = self.server.getsockname()
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


@pytest.fixture
def listeners():
    tcp = Listener(socket.AF_INET, ("127.0.0.1", 0))
    abstract = Listener(socket.AF_UNIX, f"\0tracegen-test-install-{uuid.uuid4().hex}")
    yield tcp, abstract
    for listener in (tcp, abstract):
        listener.server.shutdown(socket.SHUT_RDWR)
        listener.server.close()


def hostile_setup(port: int, abstract: str) -> dict[str, str]:
    """A package whose setup.py records what each way out gave it into attempts.json (next to it)."""
    attempts = f"""
    import json, os, socket, urllib.request

    def attempt(name, action):
        try:
            action()
            return name, "reached"
        except Exception as error:
            return name, type(error).__name__ + ": " + str(error)[:200]

    def tcp(address):
        return lambda: socket.create_connection(address, timeout=5).close()

    def abstract():
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(5)
        sock.connect({abstract!r})

    def through_proxy(target):
        proxy = os.environ.get("HTTPS_PROXY", "")
        host, port = proxy.rsplit("/", 1)[-1].rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=5)
        crlf = chr(13) + chr(10)  # setuptools rewrites a backslash-r-backslash-n in setup.py's text
        sock.sendall((("CONNECT %s HTTP/1.1" + crlf + "Host: %s" + crlf + crlf) % (target, target)).encode())
        reply = sock.recv(100)
        if not reply.startswith(b"HTTP/1.1 200"):
            raise PermissionError(reply.splitlines()[0].decode())

    results = dict([
        attempt("loopback", tcp(("127.0.0.1", {port}))),
        attempt("abstract", abstract),
        attempt("external", tcp(("example.com", 80))),
        attempt("external-ip", tcp(("93.184.215.14", 80))),
        attempt("proxy-loopback", lambda: through_proxy("127.0.0.1:{port}")),
        attempt("proxy-external", lambda: through_proxy("example.com:443")),
        attempt("http-get", lambda: urllib.request.urlopen("http://example.com/", timeout=5)),
    ])
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "attempts.json"), "w") as handle:
        json.dump(results, handle)

    from setuptools import setup

    setup(name="hostile", version="0.1", py_modules=["hostile"])
    """
    return {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
        "setup.py": attempts,
        "hostile.py": "def double(x):\n    return 2 * x\n",
        "tests/test_hostile.py": "from hostile import double\n\ndef test_double():\n    assert double(2) == 4\n",
    }


def install(tmp_path, sandbox, files: dict[str, str]):
    repo = tmp_path / "repo"
    fixtures.make_repo(repo, files)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = RepoSpec("hostile", str(repo), "main", install_timeout_s=240)
    installed, found = install_repo(spec, str(repo), str(run_dir), sandbox, PIP_CACHE, StageCounters("install"))
    failures = Failures("u")
    failures.extend(repo_input(spec), found)
    rows = [(row["stage"], row["error_type"], row["message"]) for row in failures.rows]
    return (installed and installed.env_dir), rows


def test_a_hostile_setup_py_reaches_nothing_but_the_index(tmp_path, listeners, backend):
    tcp, abstract = listeners
    env_dir, rows = install(tmp_path, backend, hostile_setup(tcp.address[1], abstract.address))
    assert env_dir is not None, rows  # setuptools and pytest came from the index
    assert os.path.exists(os.path.join(env_dir, "venv", "bin", "pytest"))
    with open(os.path.join(env_dir, "src", "attempts.json")) as handle:
        attempts = json.load(handle)
    assert set(attempts) == {
        "loopback",
        "abstract",
        "external",
        "external-ip",
        "proxy-loopback",
        "proxy-external",
        "http-get",
    }
    assert "reached" not in attempts.values(), attempts
    assert "403 Forbidden" in attempts["proxy-loopback"] and "403 Forbidden" in attempts["proxy-external"]
    assert (tcp.accepted, abstract.accepted) == (0, 0)
    (refused,) = [row for row in rows if row[1] == "InstallNetworkRefused"]
    assert refused[0] == "install" and "'hostile'" in refused[2]
    assert f"127.0.0.1:{tcp.address[1]}" in refused[2] and "example.com:443" in refused[2]


def test_the_index_hosts_follow_pip_s_configuration(tmp_path):
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nindex-url = https://mirror.example:8443/simple\n")
    assert index_hosts({}, []) == {("pypi.org", 443), ("files.pythonhosted.org", 443)}
    assert index_hosts({"PIP_CONFIG_FILE": str(config)}, []) == {("mirror.example", 8443)}
    environ = {"PIP_INDEX_URL": "http://local:3141/root/pypi", "TRACEGEN_INDEX_HOSTS": "files.local, cdn.local:8080"}
    assert index_hosts(environ, [str(config)]) == {("local", 3141), ("files.local", 443), ("cdn.local", 8080)}


def test_the_proxy_tunnels_to_allowed_hosts_only(tmp_path, listeners):
    """Host side alone: a tunnel to an allowed target carries bytes both ways; anything else is a 403."""
    echo = socket.socket()
    echo.bind(("127.0.0.1", 0))
    echo.listen()

    def serve():
        conn, _ = echo.accept()
        conn.sendall(conn.recv(100).upper())
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    allowed = ("127.0.0.1", echo.getsockname()[1])
    path = str(tmp_path / "index.sock")

    def ask(request: bytes) -> socket.socket:
        client = socket.socket(socket.AF_UNIX)
        client.settimeout(10)
        client.connect(path)
        client.sendall(request)
        return client

    tcp, _ = listeners
    with IndexProxy(path, frozenset([allowed])) as proxy:
        tunnel = ask(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % allowed[1])
        assert tunnel.recv(100) == b"HTTP/1.1 200 Connection established\r\n\r\n"
        tunnel.sendall(b"hello")
        assert tunnel.recv(100) == b"HELLO"
        refused = (b"CONNECT 127.0.0.1:%d HTTP/1.1\n\n" % tcp.address[1], b"GET http://pypi.org/ HTTP/1.1\r\n\r\n")
        for request in refused:
            assert ask(request).recv(100).startswith(b"HTTP/1.1 403 Forbidden")
    assert proxy.refused == [f"127.0.0.1:{tcp.address[1]}", "GET http://pypi.org/ HTTP/1.1"]
    assert tcp.accepted == 0 and not os.path.exists(path)
