"""The function runner's protocol with the host, both ways (tracers/runners/functions.py; host side:
pipeline/stages/runnerstream.py). Standard library only.

Commands (host → runner, on the runner's stdin, a pipe) are fixed-width headers, `KIND NNNNNNNNNNNN
LLLLLLLLLLLL\\n` (kind six letters, record number and payload length twelve digits each), then the payload:

- `config 0 L`: the settings (JSON), once, first; read by the runner;
- `record N L`: record N (JSON). The runner reads the header only; the record's own child reads the payload,
  so the runner, which every later record's process is forked from, never holds a record's data;
- `parity N L` / `finish N 0`: the answer to `traced N` under check_parity: run record N once more untraced
  (its payload again, read by that child) or go on.

Frames (runner → host, on its stdout, a pipe no record holds) are `KIND N LENGTH\\n` then LENGTH bytes:

- `start N`: record N is about to run, so a runner death is blamed on the record in flight;
- `trace N`: its trace file, sent from the file to the pipe by the kernel (sendfile: no copy passes through
  the runner's memory);
- `ended N`: how its child ended (`child_exit_0`, `killed_by_signal_9`, `wall_time_kill`);
- `traced N`: under check_parity, the runner waits for `parity N` or `finish N`;
- `parity N`: the file of its untraced run;
- `replaced N`: the name of its trace file no longer names that file (the record removed or replaced it);
- `scratch N`: it filled the scratch filesystem and was stopped;
- `done N`: record N is finished; nothing later can change what was sent for it;
- `restart N`: the runner stops; record N onward are to run in a fresh sandbox, none of them to blame.
"""

import os

COMMAND_BYTES = 33
COMMANDS = ("config", "record", "parity", "finish")
MAX_PAYLOAD = 10**12 - 1


class ProtocolError(Exception):
    """The other side broke the protocol: the runner stops."""


def command(kind, number, payload=b""):
    """One host → runner command, header and payload."""
    return b"%s %012d %012d\n" % (kind.encode("ascii"), number, len(payload)) + payload


def read_exact(fd, size):
    """`size` bytes from `fd`, fewer only at end of file."""
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_command(fd):
    """(kind, number, payload length) of the next command, or None at end of input (the host is done)."""
    header = read_exact(fd, COMMAND_BYTES)
    if not header:
        return None
    kind, number, length = header[:6].decode("ascii", "replace"), header[7:19], header[20:32]
    if (
        len(header) != COMMAND_BYTES
        or kind not in COMMANDS
        or header[6:7] + header[19:20] + header[32:] != b"  \n"
        or not (number.isdigit() and length.isdigit())
    ):
        raise ProtocolError("malformed command header %r" % header)
    return kind, int(number), int(length)


class ResultStream:
    """Frames written to descriptor `fd` (the runner's stdout)."""

    def __init__(self, fd):
        self._fd = fd

    def send(self, kind, number, payload=b""):
        self._write(b"%s %d %d\n" % (kind.encode("ascii"), number, len(payload)) + payload)

    def send_file(self, kind, number, fd, limit):
        """Frame the first `limit` bytes at most of the file open at `fd`, copied by the kernel; a file that
        shrank meanwhile is padded with newlines, so the stream stays framed."""
        size = min(os.fstat(fd).st_size, limit)
        self._write(b"%s %d %d\n" % (kind.encode("ascii"), number, size))
        offset = 0
        while offset < size:
            sent = os.sendfile(self._fd, fd, offset, size - offset)
            if sent == 0:
                self._write(b"\n" * (size - offset))
                break
            offset += sent

    def restart(self, number):
        """The last frame: records `number` onward are to run again elsewhere."""
        self.send("restart", number)

    def _write(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
