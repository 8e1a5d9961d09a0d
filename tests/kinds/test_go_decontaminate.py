"""--decontaminate in pack for Go examples: a Go program whose text carries a benchmark item's code (a Python
snippet in a string literal) has its examples and trajectory windows left out of the samples and is a
`contaminated` row of table go_programs; the other program is packed."""

import shutil

from decontam_fixtures import ITEMS, write_jsonl
from go_helpers import EXAMPLES, requires_bwrap, requires_go

from pipeline.engine.job import run_job
from pipeline.engine.reader import table_rows
from pipeline.kinds.go import GoConfig, GoKind
from pipeline.kinds.pack import PackConfig, PackKind
from pipeline.stages.decontaminate import Decontaminator
from pipeline.stages.go.runs import GoSettings
from pipeline.stages.pack.packing import PackSettings

SNIPPET = (
    'package main\n\nimport "fmt"\n\n// The checker\'s reference solution, shown to the user.\nconst reference = `'
    + ITEMS[0]["code"]
    + "`\n\nfunc main() {\n\tdone := make(chan int)\n\tgo func() { done <- len(reference) }()\n"
    + "\tfmt.Println(<-done)\n}\n"
)


@requires_go
@requires_bwrap
def test_a_go_program_that_carries_an_items_code_is_left_out_of_pack(tmp_path, ray_local):
    programs = tmp_path / "programs"
    shutil.copytree(EXAMPLES / "pingpong_unbuffered", programs / "pingpong_unbuffered")
    (programs / "snippet").mkdir()
    (programs / "snippet" / "main.go").write_text(SNIPPET)
    traced = str(tmp_path / "traced")
    run_job(GoKind(), str(programs), GoConfig(go=GoSettings(runs=4)), traced)
    assert {row["program_id"] for row in table_rows(traced, "go_programs")} == {"pingpong_unbuffered", "snippet"}

    benchmark = write_jsonl(tmp_path / "bench.jsonl", ITEMS)
    config = PackConfig(
        packing=PackSettings(seq_len=4096), tokenizer="bytes", decontaminate=Decontaminator.from_files([benchmark])
    )
    packed = str(tmp_path / "packed")
    manifest = run_job(PackKind(), traced, config, packed)

    rows = list(table_rows(packed, "contaminated"))
    assert [(r["table"], r["dropped_id"], r["item_id"], r["rule"]) for r in rows] == [
        ("go_programs", "snippet", "bench_0", "ngram")
    ]
    doc_ids = {doc_id for row in table_rows(packed, "packed") for doc_id in row["doc_ids"]}
    assert doc_ids and not any("snippet" in doc_id for doc_id in doc_ids)
    assert any("pingpong_unbuffered" in doc_id for doc_id in doc_ids)
    assert manifest["stats"]["decontaminate"]["dropped"] == {"contaminated_ngram": 1}
