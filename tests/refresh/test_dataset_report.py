"""`tracegen report ROOT`: every plot is a valid PNG and report.html shows each one."""

import json
import re
import struct
import subprocess
import sys
from pathlib import Path

from pipeline.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_report_renders_valid_pngs_that_the_html_references(tmp_path, capsys):
    rows = [{"id": f"r{i}", "code": f"def f(x):\n    return x * {i}\n", "input": str(i)} for i in range(3)]
    rows.append({"id": "bad", "code": "def f(x):\n    return 1 / 0\n", "input": "1"})
    (tmp_path / "f.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows) + "not json\n")
    (tmp_path / "sources.toml").write_text('[[functions]]\npath = "f.jsonl"\n')
    root = tmp_path / "root"
    refresh = [sys.executable, "-m", "pipeline.cli", "refresh", "--sources", str(tmp_path / "sources.toml")]
    subprocess.run(
        [*refresh, "--root", str(root), "--sandbox", "process", "--workers", "1", "--no-report"], check=True, cwd=ROOT
    )
    assert main(["report", str(root)]) == 0
    version = root / "versions" / "1"
    assert capsys.readouterr().out.strip() == f"report -> {version}/report.html"
    html = (version / "report.html").read_text()
    pngs = sorted(version.glob("*.png"))
    names = {p.name for p in pngs}
    assert {
        "tables_rows.png",
        "failures.png",
        "events_per_trace.png",
        "action_mix.png",
        "trajectory_tokens.png",
    } <= names
    for png in pngs:
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and data.endswith(b"IEND\xaeB`\x82")
        width, height = struct.unpack(">II", data[16:24])
        assert width > 100 and height > 100
    assert set(re.findall(r'<img src="([^"]+)"', html)) == names
