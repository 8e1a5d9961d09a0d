"""The install step's only way out of its sandbox: a CONNECT proxy, run by the host, that reaches the index.

An install runs with no network of its own (bwrap `--unshare-net`, Docker `network none`: loopback only, so
no host listener, host abstract unix socket or other container is reachable). The host serves this proxy on
a unix socket bound into the sandbox; `tracers.install.step` relays pip's proxy port on the sandbox's loopback to
it. The proxy accepts `CONNECT host:port` for the index hosts only (TLS stays end to end between pip and the
index) and refuses everything else with 403, remembering each refusal. Through it, code that a build runs
reaches the index and nothing else; where the host itself goes out through an HTTPS proxy (`HTTPS_PROXY`),
the tunnel is opened through that one.

The index hosts are those of pip's index URLs as the sandbox sees them (`PIP_INDEX_URL`,
`PIP_EXTRA_INDEX_URL`, `index-url`/`extra-index-url` in /etc/pip.conf, /etc/xdg/pip/pip.conf or
`PIP_CONFIG_FILE`; default https://pypi.org/simple), plus files.pythonhosted.org when PyPI is one of them,
plus `TRACEGEN_INDEX_HOSTS` (comma-separated `host[:port]`) for mirrors that serve files from elsewhere.
"""

import configparser
import os
import selectors
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

DEFAULT_INDEX = "https://pypi.org/simple"
PYPI_FILES = "files.pythonhosted.org"
PIP_CONFIG_FILES = ("/etc/pip.conf", "/etc/xdg/pip/pip.conf")
MAX_HEAD_BYTES = 8192
CONNECT_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 300.0
MAX_OPEN = 128  # sockets (two per tunnel) at once; past it a new connection is closed unanswered
CHUNK = 1 << 16


def _host_port(text: str, default_port: int) -> tuple[str, int] | None:
    """(host, port) of a URL or a `host[:port]`, lower-cased; None when it names no host."""
    parts = urlsplit(text if "//" in text else "//" + text)
    try:
        port = parts.port or (80 if parts.scheme == "http" else default_port)
    except ValueError:
        return None
    return (parts.hostname.lower(), port) if parts.hostname else None


def index_urls(environ: dict[str, str] | None = None, config_files: Iterable[str] = PIP_CONFIG_FILES) -> list[str]:
    """pip's index URLs as a sandboxed pip sees them: the environment first, else the config files."""
    environ = dict(os.environ if environ is None else environ)
    files = list(config_files) + ([environ["PIP_CONFIG_FILE"]] if environ.get("PIP_CONFIG_FILE") else [])
    parser = configparser.ConfigParser(interpolation=None)
    parser.read([path for path in files if os.path.isfile(path)], encoding="utf-8")

    def setting(env_key: str, option: str) -> list[str]:
        if environ.get(env_key):
            return environ[env_key].split()
        for section in ("install", "global"):
            if parser.has_option(section, option):
                return parser.get(section, option).split()
        return []

    return (setting("PIP_INDEX_URL", "index-url") or [DEFAULT_INDEX]) + setting(
        "PIP_EXTRA_INDEX_URL", "extra-index-url"
    )


def index_hosts(environ: dict[str, str] | None = None, config_files: Iterable[str] = PIP_CONFIG_FILES) -> frozenset:
    """The (host, port) pairs the install step may reach (see the module docstring)."""
    environ = dict(os.environ if environ is None else environ)
    hosts = {pair for url in index_urls(environ, config_files) if (pair := _host_port(url, 443))}
    if ("pypi.org", 443) in hosts:
        hosts.add((PYPI_FILES, 443))
    extra = [item.strip() for item in environ.get("TRACEGEN_INDEX_HOSTS", "").split(",") if item.strip()]
    hosts.update(pair for item in extra if (pair := _host_port(item, 443)))
    return frozenset(hosts)


def upstream_proxy(environ: dict[str, str] | None = None) -> tuple[str, int] | None:
    """The host's own HTTPS proxy (`HTTPS_PROXY`/`https_proxy`), if it has one."""
    environ = dict(os.environ if environ is None else environ)
    url = environ.get("HTTPS_PROXY") or environ.get("https_proxy")
    return _host_port(url, 3128) if url else None


@dataclass
class IndexProxy:
    """A CONNECT proxy on the unix socket `path` that opens tunnels to `allowed` (host, port) pairs only.

    Use it as a context manager around the sandboxed install: it listens on entry and stops on exit (open
    tunnels are closed). `refused` lists each refused target as `host:port` (or the refused request line).
    With no allowed host (an offline index: file paths only) every request is refused.
    """

    path: str
    allowed: frozenset
    upstream: tuple[str, int] | None = None
    refused: list[str] = field(default_factory=list)

    def __post_init__(self):
        if len(os.fsencode(self.path)) >= 100:
            raise ValueError(f"index proxy socket path {self.path!r} is too long for a unix socket")
        self._server: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def __enter__(self) -> "IndexProxy":
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(self.path)
        os.chmod(self.path, 0o666)  # the sandbox's uid connects to it
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, name="tracegen-index-proxy", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopped.set()
        if self._server is not None:
            try:
                self._server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._server.close()
        with self._lock:
            for sock in list(self._open):
                _close(sock)
            self._open.clear()
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._server.accept()  # type: ignore[union-attr]
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _track(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._stopped.is_set() or len(self._open) >= MAX_OPEN:
                _close(sock)
                return False
            self._open.add(sock)
            return True

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        try:
            if not self._track(client):
                return
            client.settimeout(CONNECT_TIMEOUT_S)
            head, rest = _read_head(client)
            target = _connect_target(head)
            if target is None or target not in self.allowed:
                line = head.split(b"\n", 1)[0][:200].decode("ascii", "replace")
                self.refused.append(f"{target[0]}:{target[1]}" if target else line)
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            try:
                upstream = self._open_tunnel(target)
            except OSError:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            if not self._track(upstream):
                return
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            _relay(client, upstream)
        except (OSError, ValueError):
            pass
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    with self._lock:
                        self._open.discard(sock)
                    _close(sock)

    def _open_tunnel(self, target: tuple[str, int]) -> socket.socket:
        if self.upstream is None:
            return socket.create_connection(target, timeout=CONNECT_TIMEOUT_S)
        sock = socket.create_connection(self.upstream, timeout=CONNECT_TIMEOUT_S)
        try:
            host = f"{target[0]}:{target[1]}".encode("ascii")
            sock.sendall(b"CONNECT " + host + b" HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
            head, rest = _read_head(sock)
            if head.split(b" ", 2)[1:2] != [b"200"] or rest:
                raise OSError(f"upstream proxy refused the tunnel: {head[:100]!r}")
        except (OSError, ValueError, IndexError):
            sock.close()
            raise
        return sock


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """The request or response head up to the blank line (CRLF or bare LF), and whatever bytes came after it."""
    data = b""
    while True:
        ends = [(data.find(mark), mark) for mark in (b"\r\n\r\n", b"\n\n") if mark in data]
        if ends:
            end, mark = min(ends)
            return data[:end].replace(b"\r\n", b"\n"), data[end + len(mark) :]
        if len(data) > MAX_HEAD_BYTES:
            raise ValueError("head too long")
        chunk = sock.recv(4096)
        if not chunk:
            raise ValueError("connection closed before the end of the head")
        data += chunk


def _connect_target(head: bytes) -> tuple[str, int] | None:
    """(host, port) of a `CONNECT host:port HTTP/1.x` request line; None for anything else."""
    parts = head.split(b"\n", 1)[0].split(b" ")
    if len(parts) != 3 or parts[0] != b"CONNECT" or not parts[2].startswith(b"HTTP/1."):
        return None
    host, sep, port = parts[1].decode("ascii", "replace").rpartition(":")
    if not sep or not port.isdigit() or not host or not 0 < int(port) < 65536:
        return None
    return host.strip("[]").lower(), int(port)


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes or nothing moves for IDLE_TIMEOUT_S."""
    peer = {a: b, b: a}
    with selectors.DefaultSelector() as selector:
        for sock in peer:
            sock.setblocking(True)
            sock.settimeout(IDLE_TIMEOUT_S)
            selector.register(sock, selectors.EVENT_READ)
        while True:
            ready = selector.select(IDLE_TIMEOUT_S)
            if not ready:
                return
            for key, _ in ready:
                data = key.fileobj.recv(CHUNK)  # type: ignore[union-attr]
                if not data:
                    return
                peer[key.fileobj].sendall(data)  # type: ignore[index]


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
