"""Issue 10 item 2, what a record can *see*: nothing of another record is in its memory, on any path it can
open, or in what the runner exposes. The runner never holds a record (each record's child reads its own
from the runner's stdin; traces go from file to pipe by sendfile), so a record forked after another finds
none of its code, input or values; a record's files are gone before the next one starts; no request file
exists. Each hostile record sits between ordinary records that carry canaries and are traced as in process."""

import shutil

import pytest
from hostile_helpers import hostile, trace_chunk

from pipeline.sources.function_records import FunctionRecord

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PREFIX = "tracegen-canary:"  # what the finders look for: a canary's own part (its record's id) follows it

# Every record carrying a canary puts it in its code, its input and a local, and leaves a file named after it.
CANARY = (
    "import os\n\ndef f(tag):\n    value = %r + tag\n"
    "    with open(os.path.join(os.environ['TMPDIR'], value), 'w') as out:\n        out.write(value)\n"
    "    return len(value)\n"
)

FINDERS = {
    # Reads all the data memory of its own process (a fork of the runner; /proc/self/mem is closed to it, as
    # the child is not dumpable, so through ctypes).
    "memory_scanner": """
import ctypes

def f():
    found = set()
    with open('/proc/self/maps') as maps:
        spans = [line.split() for line in maps]
    for fields in spans:
        anonymous = len(fields) == 5 or fields[5] in ('[heap]', '[stack]')  # where a process's data lives
        if 'r' not in fields[1] or not anonymous:
            continue
        start, end = (int(x, 16) for x in fields[0].split('-'))
        data = ctypes.string_at(start, end - start)
        at = data.find(PREFIX)
        while at >= 0:
            found.add(data[at + len(PREFIX):at + len(PREFIX) + 12].decode('latin-1'))
            at = data.find(PREFIX, at + 1)
    return sorted(found)
""",
    # Reads every file it can open outside the system directories and the interpreter's own.
    "file_scanner": """
SYSTEM = ('/proc', '/sys', '/dev', '/usr', '/etc', '/opt', '/bin', '/sbin', '/lib', '/lib64')

def f():
    found = set()
    for root, dirs, files in os.walk('/'):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in SYSTEM and d not in ('.pyenv', '__pycache__')]
        for name in files:
            names = [name]
            try:
                with open(os.path.join(root, name), 'rb') as handle:
                    names.append(handle.read(1 << 20).decode('latin-1'))
            except OSError:
                pass
            for text in names:
                at = text.find(PREFIX.decode())
                while at >= 0:
                    found.add(text[at + len(PREFIX):at + len(PREFIX) + 12])
                    at = text.find(PREFIX.decode(), at + 1)
    return sorted(found)
""",
    # Reads what /proc shows of the runner and of every other process it can see.
    "proc_scanner": """
def f():
    found = set()
    for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
        for part in ('cmdline', 'environ', 'mem', 'fd'):
            try:
                path = '/proc/%s/%s' % (pid, part)
                text = ' '.join(os.listdir(path)) if part == 'fd' else open(path, 'rb').read(1 << 20).decode('latin-1')
            except OSError:
                continue
            at = text.find(PREFIX.decode())
            while at >= 0:
                found.add(text[at + len(PREFIX):at + len(PREFIX) + 12])
                at = text.find(PREFIX.decode(), at + 1)
    return sorted(found)
""",
}


def canary(record_id: str) -> FunctionRecord:
    secret = f"{PREFIX}{record_id}"
    return FunctionRecord(record_id, CANARY % secret[:-4], repr(secret[-4:]), "f", f"canary:{record_id}")


def test_no_record_sees_another_records_code_input_values_or_files():
    records = []
    for name, body in FINDERS.items():
        prefix = f"PREFIX = {PREFIX[:8]!r}.encode() + {PREFIX[8:]!r}.encode()\n"
        records += [canary(f"{name[:4]}-before"), hostile(name, prefix + body), canary(f"{name[:4]}-after")]
    rows, failures = trace_chunk(records, max_events=100_000)
    assert failures == {}
    canaries = [record.id for record in records if record.id.endswith(("-before", "-after"))]
    for name in FINDERS:
        assert (rows[name]["exit"], rows[name]["truncated"]) == ("normal", False), name
        seen = rows[name]["events"][-1]["arg"]
        assert not [other for other in canaries if other[:6] in seen], (name, seen)
    for record in records:
        if record.id.endswith(("-before", "-after")):
            assert rows[record.id]["exit"] == "normal"
            assert rows[record.id]["events"][-1]["arg"] == str(len(PREFIX + record.id))


# Where each finder's own record plants its canary, to show the finder would see one.
PLANTS = {
    "memory_scanner": CANARY.replace("def f(tag):", "def plant(tag):"),
    "file_scanner": CANARY.replace("def f(tag):", "def plant(tag):"),
    "proc_scanner": (
        "import sys, time\n\ndef plant(tag):\n    if os.fork() == 0:\n"
        "        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(5)', %r + tag])\n"
        "    time.sleep(0.5)\n"
    ),
}


def test_the_finders_do_find_a_canary_of_their_own():
    """The finders are not blind: each one finds the canary its own record planted first."""
    records = []
    for name, body in FINDERS.items():
        own = PLANTS[name] % f"{PREFIX}own-{name[:4]}"
        prefix = f"PREFIX = {PREFIX[:8]!r}.encode() + {PREFIX[8:]!r}.encode()\n"
        code = prefix + own + body.replace("def f():\n", "def f():\n    plant('')\n", 1)
        records.append(hostile(name, code))
    rows, failures = trace_chunk(records, max_events=100_000)
    assert failures == {}
    for name in FINDERS:
        seen = rows[name]["events"][-1]["arg"]
        assert f"own-{name[:4]}" in seen, (name, seen)
