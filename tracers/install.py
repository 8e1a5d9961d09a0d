"""The `install` step of a repository (network on, run by the sandbox's base Python).

It creates a virtual environment and installs pytest and the repository into it; it writes
`{"ok", "steps": [{"command", "returncode", "output"}]}` to the request's `result` path. With `index_socket`
in the request (the sandbox has no network of its own), a relay on the sandbox's loopback forwards pip's
proxy connections to the host's index proxy on that unix socket (pipeline/sandbox/index_proxy.py), so
the index is the one host a build reaches. The default
install is one pip run: pytest, the package with its test extra (`test`, `tests` or `testing`, else
`dev`) when the repository is a package, and every test requirements file found (`requirements.txt`
too when it is not a package). A manifest `install` list replaces the package part: each command runs
under `sh -c` in a copy of the worktree, with the venv first on PATH. Standard library only.
"""

import json
import os
import socket
import subprocess
import sys
import threading

TEST_EXTRAS = ("test", "tests", "testing")
REQUIREMENT_FILES = (
    "requirements-test.txt",
    "requirements_test.txt",
    "test-requirements.txt",
    "test_requirements.txt",
    "requirements-tests.txt",
    "requirements-dev.txt",
    "requirements_dev.txt",
    "dev-requirements.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "requirements/dev.txt",
    "tests/requirements.txt",
)
OUTPUT_CHARS = 4000
PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "PIP_PROXY")


def _tail(text, limit=OUTPUT_CHARS):
    return text if len(text) <= limit else "..." + text[-limit:]


def _run_step(argv, cwd, env, steps, timeout=None):
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
        output, code = done.stdout.decode("utf-8", "replace"), done.returncode
    except (OSError, subprocess.SubprocessError) as error:
        output, code = "%s: %s" % (type(error).__name__, error), 127
    steps.append(
        {"command": " ".join(argv) if isinstance(argv, list) else argv, "returncode": code, "output": _tail(output)}
    )
    return code == 0


def _pip_version_ok():
    try:
        import pip

        return tuple(int(part) for part in pip.__version__.split(".")[:2]) >= (22, 3)
    except Exception:
        return False


def _extras(src):
    """The test extra declared by pyproject.toml or setup.cfg, if any."""
    names = set()
    try:
        import tomllib

        with open(os.path.join(src, "pyproject.toml"), "rb") as handle:
            names.update(tomllib.load(handle).get("project", {}).get("optional-dependencies", {}))
    except Exception:
        pass
    try:
        import configparser

        parser = configparser.ConfigParser()
        parser.read(os.path.join(src, "setup.cfg"), encoding="utf-8")
        if parser.has_section("options.extras_require"):
            names.update(parser.options("options.extras_require"))
    except Exception:
        pass
    for name in TEST_EXTRAS + ("dev",):
        if name in names:
            return name
    return None


def default_install_args(src):
    """pip install arguments of the default install: pytest, the package[test extra], requirement files."""
    is_package = any(os.path.isfile(os.path.join(src, name)) for name in ("pyproject.toml", "setup.py", "setup.cfg"))
    args = ["pytest"]
    if is_package:
        extra = _extras(src)
        args.append(src + ("[%s]" % extra if extra else ""))
    files = list(REQUIREMENT_FILES) + ([] if is_package else ["requirements.txt"])
    for name in files:
        if os.path.isfile(os.path.join(src, name)):
            args += ["-r", os.path.join(src, name)]
    return args


def _pipe(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    for sock in (source, sink):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _forward(client, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
    _pipe(client, upstream)


def start_index_relay(path):
    """Listen on the sandbox's loopback and relay each connection to the unix socket `path`; the port."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(64)

    def accept():
        while True:
            client, _ = server.accept()
            threading.Thread(target=_forward, args=(client, path), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return server.getsockname()[1]


def install(request):
    venv_dir, src = request["venv"], request["src"]
    cache = request.get("pip_cache")
    env = {key: value for key, value in os.environ.items()}
    env.update(
        {
            "PIP_NO_INPUT": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_PROGRESS_BAR": "off",
            "SETUPTOOLS_SCM_PRETEND_VERSION": "0.0.0",
            "VIRTUAL_ENV": venv_dir,
            "PATH": os.path.join(venv_dir, "bin") + os.pathsep + env.get("PATH", "/usr/bin:/bin"),
        }
    )
    if request.get("index_socket"):
        proxy = "http://127.0.0.1:%d" % start_index_relay(request["index_socket"])
        env.update({key: proxy for key in PROXY_ENV})
        env.pop("NO_PROXY", None)
        env.pop("no_proxy", None)
    if cache:
        env["PIP_CACHE_DIR"] = cache
    else:
        env["PIP_NO_CACHE_DIR"] = "1"
    commands = request.get("commands")
    steps = []
    python = os.path.join(venv_dir, "bin", "python")
    external_pip = commands is None and _pip_version_ok()
    venv_argv = [sys.executable, "-m", "venv"] + (["--without-pip"] if external_pip else []) + [venv_dir]
    ok = _run_step(venv_argv, src, env, steps)
    pip = [sys.executable, "-m", "pip", "--python", python] if external_pip else [python, "-m", "pip"]
    if ok:
        args = default_install_args(src) if commands is None else ["pytest"]
        ok = _run_step(pip + ["install"] + args, src, env, steps)
    for command in commands or []:
        if not ok:
            break
        ok = _run_step(["sh", "-c", command], src, env, steps)
        steps[-1]["command"] = command
    with open(request["result"], "w", encoding="utf-8") as handle:
        json.dump({"ok": ok, "steps": steps}, handle)
