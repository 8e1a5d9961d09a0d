"""What keeps one function record from reaching the next inside a shared sandbox (tracers/runners/functions.py).

All records of a chunk run as one uid, so the guarantee rests on three things the runner does, not on
permissions: it is not dumpable (`untraceable`: no ptrace, no /proc/PID/mem, fd or environ of it for
a process of the same uid), it is a child subreaper, so everything a record starts (a `setsid` or
double-forked daemon included) stays its descendant, and between two records it SIGKILLs every descendant
(`kill_descendants`, stopped and traced ones too) and empties the records' scratch directory
(`empty_directory`) before it starts the next one. Standard library only.
"""

import ctypes
import os
import signal
import stat
import time

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
MAX_DEPTH = 64  # a deeper tree in the scratch directory is not emptied: the runner starts afresh instead

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option, value):
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, "prctl(%d): %s" % (option, os.strerror(errno)))


def untraceable():
    """Make this process non-dumpable: processes of the same uid can no longer ptrace it or open its
    /proc entries (mem, fd, environ); the flag is inherited by fork and kept until an exec."""
    _prctl(PR_SET_DUMPABLE, 0)


def become_subreaper():
    """Orphans of any descendant are re-parented to this process instead of the sandbox's init."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


SEAL_STREAMS_ENV = "TRACEGEN_SEAL_STREAMS"  # set where the streams are files a record could open by path
SEAL_WAIT_S = 30.0


def await_sealed_streams():
    """Where the backend says so (docker: stdin and stdout are FIFOs, stderr a file, in a directory bound into
    the container), tell the host the streams are open — one line on stderr — and wait until it has made
    them unopenable by path (owner root, mode 0600): the descriptors this process holds keep working, but
    no record can open them to read the commands, forge frames or steal them."""
    if os.environ.pop(SEAL_STREAMS_ENV, None) != "1":
        return
    os.write(2, b"tracegen runner: streams open\n")
    paths = [os.readlink("/proc/self/fd/%d" % fd) for fd in (0, 1, 2)]
    deadline = time.monotonic() + SEAL_WAIT_S
    while any(os.access(path, os.R_OK) or os.access(path, os.W_OK) for path in paths if path.startswith("/")):
        if time.monotonic() > deadline:
            raise SystemExit("tracegen runner: the host did not seal the output streams within %gs" % SEAL_WAIT_S)
        time.sleep(0.002)


def die_with_parent():
    """SIGKILL this process when its parent (the runner) dies, where no pid namespace ends it anyway."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def descendants(pid):
    """Pids of every live process below `pid` (read from /proc/PID/stat, which any uid may read)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent, state = _parent_and_state(int(entry))
            if parent is not None and state != "Z":
                children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _parent_and_state(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None, None
    return int(fields[1]), fields[0].decode("ascii", "replace")


def kill_descendants():
    """SIGKILL every descendant of this process and reap them, until none is left.

    Each pid is signalled through a pidfd opened after the scan and checked to still be a descendant, so a
    reused pid is never hit. A descendant forked during a scan is found by the next one: as a subreaper this
    process inherits the orphans of those it kills.
    """
    me = os.getpid()
    while True:
        reap()
        if _has_no_children(me):
            return
        found = descendants(me)
        for pid in found:
            _kill_if_below(pid, set(found) | {me})
        reap()
        if not found:
            return


def _has_no_children(pid):
    """True when /proc says `pid` has no child at all (then it has no descendant: as a subreaper it inherits
    every orphan); False when it has one or the kernel does not list children."""
    try:
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, task), "rb") as handle:
                if handle.read().strip():
                    return False
    except OSError:
        return False
    return True


def _kill_if_below(pid, family):
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return  # already gone
    try:
        if _parent_and_state(pid)[0] in family:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(fd)


def reap():
    """Collect every child that has exited (orphans re-parented here included), without blocking."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def empty_directory(dir_fd, depth=0):
    """Remove every entry a record could have made in the directory open at `dir_fd`, whatever its modes,
    never following a link; True when nothing is left.

    Kept: mount points (the sandbox's binds of host paths, on another filesystem) and directories of
    another uid (the ones the sandbox made above its binds: a record cannot write in them). Only called when
    no record process is left, so nothing changes the tree meanwhile. OSError (a tree deeper than
    MAX_DEPTH, an entry that cannot be removed) tells the caller the directory could not be emptied.
    """
    if depth > MAX_DEPTH:
        raise OSError("the scratch directory is nested deeper than %d levels" % MAX_DEPTH)
    device, empty = os.fstat(dir_fd).st_dev, True
    for name in os.listdir(dir_fd):
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(name, dir_fd=dir_fd)
        elif info.st_dev != device or info.st_uid != os.getuid():
            empty = False
        elif _empty_subdirectory(dir_fd, name, depth):
            os.rmdir(name, dir_fd=dir_fd)
        else:
            empty = False
    return empty


def _empty_subdirectory(dir_fd, name, depth):
    os.chmod(name, 0o700, dir_fd=dir_fd)  # a directory of ours (never a link: nothing runs to swap it now)
    sub_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        return empty_directory(sub_fd, depth + 1)
    finally:
        os.close(sub_fd)
