"""Issue 10 item 2 under docker: the runner's stdin and stdout are FIFOs and its stderr a file in a directory
bound into the container, and once the runner has started nothing in the container can open them by path,
so a record can neither read the commands (the records after it) nor forge the frames (their traces).
Each hostile record is followed by ordinary ones, which must come out exactly as traced in process."""

from docker_helpers import require_docker_engine
from hostile_helpers import assert_ordinary_untouched, beside_ordinary, hostile, trace_chunk

# Finds the stream files through the mount table and tries to read them or append forged frames.
FORGE = """
def f():
    tried = []
    for line in open('/proc/self/mountinfo'):
        mount = line.split()[4]
        if 'tracegen-io-' not in mount:
            continue
        for name in ('stdin', 'stdout', 'stderr'):
            for mode in ('rb', 'ab', 'wb'):
                try:
                    with open(os.path.join(mount, name), mode) as handle:
                        handle.read(1) if mode == 'rb' else handle.write(b'done 9 0\\n')
                    tried.append('wrote ' + name)
                except OSError as error:
                    tried.append(type(error).__name__)
        try:
            os.chmod(os.path.join(mount, 'stdout'), 0o666)
            tried.append('chmod')
        except OSError as error:
            tried.append(type(error).__name__)
    return tried
"""


def test_no_record_can_open_the_runner_s_stream_files_under_docker():
    require_docker_engine()
    records = beside_ordinary([hostile("stream_forger", FORGE)])
    rows, failures = trace_chunk(records, "docker")
    assert not failures
    tried = rows["stream_forger"]["events"][-1]["arg"]
    assert "PermissionError" in tried and "wrote" not in tried and "'chmod'" not in tried, tried
    assert tried.count("PermissionError") == 10  # 3 streams x 3 modes, and the chmod
    assert_ordinary_untouched(records, rows)
