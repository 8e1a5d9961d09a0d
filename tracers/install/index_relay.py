"""The relay from pip's proxy port on the sandbox's loopback to the host's index proxy on a unix socket.

The sandbox has no network of its own; the host binds a unix socket of its index proxy
(pipeline/sandbox/index_proxy.py) into it, and this relay makes it a proxy port pip can use. Standard library only.
"""

import socket
import threading


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
