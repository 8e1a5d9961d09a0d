"""The runner's hygiene between records: every descendant killed (daemons and stopped ones too), the scratch
emptied whatever its modes, and links never followed."""

import os
import subprocess
import sys
import textwrap

from tracers.guard import isolation

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    from tracers.guard import isolation

    isolation.become_subreaper()
    for kind in ("daemon", "stopped", "sleeper"):
        if os.fork() == 0:
            if kind == "daemon":
                os.setsid()
                if os.fork():
                    os._exit(0)
            if kind == "stopped":
                os.kill(os.getpid(), signal.SIGSTOP)
            time.sleep(60)
            os._exit(0)
    time.sleep(0.3)
    before = len(isolation.descendants(os.getpid()))
    isolation.kill_descendants()
    print(before, len(isolation.descendants(os.getpid())))
    """
)


def test_every_descendant_is_killed_and_reaped():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.split() == ["3", "0"]


def test_the_scratch_is_emptied_and_links_are_not_followed(tmp_path):
    scratch, outside = tmp_path / "scratch", tmp_path / "outside"
    scratch.mkdir()
    outside.mkdir()
    (outside / "keep").write_text("host")
    locked = scratch / "a" / "b"
    locked.mkdir(parents=True)
    (locked / "file").write_text("x")
    (scratch / "link").symlink_to(outside)
    os.mkfifo(scratch / "fifo")
    locked.chmod(0)
    (scratch / "a").chmod(0o500)
    fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert isolation.empty_directory(fd) is True
    finally:
        os.close(fd)
    assert os.listdir(scratch) == [] and (outside / "keep").read_text() == "host"
