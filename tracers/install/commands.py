"""The install's commands: each run within what is left of one deadline, its output bounded, its step recorded.

A command past its time is killed with its process group; its output keeps its first and last OUTPUT_KEEP
bytes (what the parsers read), a step records the last OUTPUT_CHARS, and `error_summary` says in one line why
a command failed. Standard library only.
"""

import os
import re
import signal
import subprocess
import threading
import time

OUTPUT_CHARS = 4000
OUTPUT_KEEP = 1 << 20  # bytes of a command's output kept at each end (what the parsers read)
MIN_STEP_S = 5.0


def _tail(text, limit=OUTPUT_CHARS):
    return text if len(text) <= limit else "..." + text[-limit:]


class Output:
    """A command's output, its first and last OUTPUT_KEEP bytes kept."""

    def __init__(self):
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0

    def add(self, data):
        room = OUTPUT_KEEP - len(self.head)
        self.head += data[:room]
        self.tail += data[room:] if room > 0 else data
        if len(self.tail) > OUTPUT_KEEP:
            self.dropped += len(self.tail) - OUTPUT_KEEP
            del self.tail[: len(self.tail) - OUTPUT_KEEP]

    def text(self):
        gap = b"\n...(%d bytes)...\n" % self.dropped if self.dropped else b""
        return (bytes(self.head) + gap + bytes(self.tail)).decode("utf-8", "replace")


class Runner:
    """Runs the install's commands within one deadline and records each in `steps`."""

    def __init__(self, env, steps, deadline):
        self.env, self.steps, self.deadline = env, steps, deadline
        self.timed_out = False

    def left(self):
        return self.deadline - time.monotonic()

    def run(self, argv, cwd, env=None, timeout=None, label=None):
        """(ok, output) of `argv` (a list; a string runs under `sh -c`), killed with its process group past
        `timeout` or the deadline."""
        limit = self.left() if timeout is None else min(timeout, self.left())
        if limit < MIN_STEP_S:
            self.timed_out = True
            return False, "not started: the install's time budget is spent"
        output, code = Output(), None
        command = ["sh", "-c", argv] if isinstance(argv, str) else argv
        try:
            process = subprocess.Popen(
                command,
                cwd=cwd,
                env=env or self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as error:
            process, code = None, 127
            output.add(("%s: %s" % (type(error).__name__, error)).encode())
        if process is not None:
            reader = threading.Thread(target=_drain, args=(process.stdout, output), daemon=True)
            reader.start()
            try:
                code = process.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                code = process.wait()
                output.add(b"\nTimeoutExpired: killed after %ds\n" % int(limit))
                self.timed_out = timeout is None or limit < timeout
            reader.join(5)
        text = output.text()
        shown = label or (argv if isinstance(argv, str) else " ".join(argv))
        self.steps.append({"command": shown[:2000], "returncode": code, "output": _tail(text)})
        return code == 0, text


def _drain(stream, output):
    try:
        for data in iter(lambda: stream.read1(65536), b""):
            output.add(data)
    except (OSError, ValueError):
        pass


def _kill_group(process):
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()


def error_summary(output, limit=500):
    """The lines of a failed command's output that say why: its `ERROR:` lines and the last exception line
    (a build's traceback), else its last lines."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"(ERROR|error):", line)]
    raised = [line for line in lines if re.match(r"[A-Za-z_.]*(Error|Exception|Exit)\b.*:", line)]
    picked = (raised[-1:] + [line for line in errors if "subprocess-exited-with-error" not in line][-2:]) or lines[-3:]
    return " | ".join(picked)[-limit:] or "(no output)"
