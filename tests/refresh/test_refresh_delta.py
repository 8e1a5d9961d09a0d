"""A refreshed root reads without tracegen: polars (`scan_delta`) and DuckDB (its delta extension) read each
table of each of three versions with exactly the rows `tracegen inspect` counts for that version."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from go_helpers import EXAMPLES as GO_EXAMPLES
from go_helpers import requires_go
from test_refresh import ROOT, cli, records, write_jsonl

from schemas import TABLES

READER = """
import json, sys
import duckdb, duckdb_ext, polars as pl

root, tables, versions = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
con = duckdb.connect()
con.execute("SET extension_directory = ?", [duckdb_ext.__path__[0] + "/extensions"])  # the wheel's, offline
con.execute("SET autoinstall_known_extensions = false")
con.execute("LOAD delta")
rows = {}
for table in tables:
    path = f"{root}/{table}"
    for n in versions:
        con.execute(f"ATTACH '{path}' AS t (TYPE delta, VERSION {n})")
        duck = con.execute("SELECT * FROM t").fetch_arrow_table().num_rows
        con.execute("DETACH t")
        rows[f"{table}@{n}"] = [pl.scan_delta(path, version=n).collect().height, duck]
    rows[f"{table}@latest"] = [con.execute(f"SELECT count(*) FROM delta_scan('{path}')").fetchone()[0]]
assert not {name.split(".")[0] for name in sys.modules} & {"pipeline", "schemas", "tracers"}
print(json.dumps(rows))
"""


def inspected_rows(version: Path) -> dict[str, int]:
    """Rows per table as `tracegen inspect` reports them for one version."""
    text = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "inspect", str(version)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=240,
    ).stdout
    tables = text.split("\ntables:\n", 1)[1].split("\n\n", 1)[0]
    rows = {name: int(count) for name, count in re.findall(r"^  (\w+)\s+(\d+) rows ", tables, re.MULTILINE)}
    for empty in re.findall(r"^  \(no rows: (.*)\)$", tables, re.MULTILINE):
        rows |= dict.fromkeys(empty.split(", "), 0)
    return rows


@requires_go
def test_polars_and_duckdb_read_every_version_of_every_table_as_inspect_counts_it(tmp_path):
    write_jsonl(tmp_path / "f.jsonl", records(12) + [{"id": "bad", "code": "def f(:\n", "input": "1"}])
    shutil.copytree(GO_EXAMPLES / "sequential", tmp_path / "go" / "sequential")
    (tmp_path / "sources.toml").write_text('[[functions]]\npath = "f.jsonl"\n\n[[go]]\npath = "go"\n')
    root = tmp_path / "root"
    refresh = [*cli("--sources", str(tmp_path / "sources.toml"), "--root", str(root), "--no-report", "--go-runs", "2")]
    subprocess.run(refresh, cwd=ROOT, check=True, timeout=240)
    write_jsonl(tmp_path / "f.jsonl", records(12)[1:] + records(6, start=100))  # r0 and the failure dropped
    subprocess.run([*refresh, "--compact", "always"], cwd=ROOT, check=True, timeout=240)
    write_jsonl(tmp_path / "f.jsonl", records(12)[1:] + records(6, start=100) + records(3, start=200))
    shutil.copytree(GO_EXAMPLES / "pingpong_unbuffered", tmp_path / "go" / "pingpong_unbuffered")
    subprocess.run(refresh, cwd=ROOT, check=True, timeout=240)
    versions = [1, 2, 3]
    assert sorted(int(p.name) for p in (root / "versions").iterdir()) == versions

    latest = [root / table / "_delta_log" / f"{3:020d}.json" for table in TABLES]
    written = [path.read_bytes() for path in latest]
    for path in latest:  # as if killed between version 3's commit and its Delta commits
        path.unlink()
    assert "nothing new" in subprocess.run(refresh, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    assert [path.read_bytes() for path in latest] == written  # the next refresh wrote them again, the same

    read = subprocess.run(
        [sys.executable, "-c", READER, str(root), json.dumps(list(TABLES)), json.dumps(versions)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
        timeout=240,
    )
    rows = json.loads(read.stdout)
    expected = {n: inspected_rows(root / "versions" / str(n)) for n in versions}
    assert expected[1]["traces"] < expected[3]["traces"] and expected[2] != expected[3]  # three different versions
    assert expected[1]["failures"] and expected[3]["go_runs"] > expected[1]["go_runs"] > 0
    for table in TABLES:
        for n in versions:
            assert rows[f"{table}@{n}"] == [expected[n][table]] * 2, (table, n)
        assert rows[f"{table}@latest"] == [expected[3][table]]
