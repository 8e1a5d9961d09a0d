"""The runner's result stream: how tracers/function_runner.py hands each finished record to the host.

The stream is the runner's stdout, a descriptor no record holds: each record's child points its own 1 and 2
at its output file before the record's code runs, and the runner is not dumpable, so /proc/RUNNER/fd/1 is
closed to processes of its uid. It is a sequence of frames, each `KIND NNNNNN LENGTH\\n` then LENGTH bytes:

- `start N`: record N is about to run, so a runner death is blamed on the record in flight;
- `trace N`: its trace file as the runner read it through its own descriptor, with the end object added
  when the child wrote none;
- `parity N`: the file of its untraced run (check_parity);
- `replaced N`: the name of its trace file no longer names that file (the record removed or replaced it);
- `scratch N`: it filled the scratch filesystem and was stopped;
- `done N`: record N is finished; nothing later can change what was sent for it;
- `restart N`: the runner stops; records N onward are to run in a fresh sandbox, none of them to blame
  (the stream reached the file size limit, or the scratch directory could not be emptied).

The host's parser is pipeline/stages/runnerstream.py. Standard library only.
"""

import os
import resource
import stat

RESTART_RESERVE = 64  # bytes always kept free for the `restart` frame


class StreamFull(Exception):
    """The next frame would pass the stream's file size limit."""


class ResultStream:
    """Frames written to descriptor `fd`; a regular file is kept under this process's RLIMIT_FSIZE."""

    def __init__(self, fd):
        self._fd = fd
        info = os.fstat(fd)
        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        regular = stat.S_ISREG(info.st_mode) and soft != resource.RLIM_INFINITY
        self._room = soft - info.st_size - RESTART_RESERVE if regular else None

    def send(self, kind, number, payload=b""):
        """Write one frame whole; StreamFull (nothing written) when it does not fit."""
        frame = b"%s %06d %d\n" % (kind.encode("ascii"), number, len(payload)) + payload
        if self._room is not None:
            if len(frame) > self._room:
                raise StreamFull(kind, number)
            self._room -= len(frame)
        self._write(frame)

    def restart(self, number):
        """The last frame: records `number` onward are to run again elsewhere (fits in the reserve)."""
        self._write(b"restart %06d 0\n" % number)

    def _write(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
