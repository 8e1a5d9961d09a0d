"""Helpers shared by the sandbox backends' tests."""

import time

from pipeline.sandbox.bwrap import processes_of

# Prints "<host> connected" or "<host> <exception name>" for each host given on the command line.
CONNECT = """
import socket, sys
port = int(sys.argv[1])
for host in sys.argv[2:]:
    try:
        socket.create_connection((host, port), timeout=2).close()
        print(host, "connected")
    except OSError as error:
        print(host, type(error).__name__)
"""


def wait_for_no_processes(uid: int, timeout: float) -> list[int]:
    """The processes of `uid` still there after up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while (left := processes_of(uid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def proc_status(text: bytes) -> dict[str, str]:
    """/proc/self/status as a dict of stripped values."""
    return {
        key: value.strip() for key, value in (line.split(":", 1) for line in text.decode().splitlines() if ":" in line)
    }
