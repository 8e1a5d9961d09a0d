"""refresh --decontaminate: a night with a benchmark set drops the published records that copy its items (each a
`contaminated` row of the new version) and keeps the rest; the version's manifest names the benchmark file, and
its report counts the drops per benchmark."""

from decontam_fixtures import ITEMS, PLANTED, PLANTED_ITEM, unrelated_functions, write_jsonl

from pipeline.engine.reader import open_dataset, table_rows
from pipeline.inspect import summarize
from pipeline.kinds.functions import FunctionsConfig
from pipeline.refresh.plan import RefreshConfigs
from pipeline.refresh.sequence import refresh
from pipeline.stages.decontaminate import Decontaminator


def test_a_refresh_with_a_benchmark_set_drops_the_copies(tmp_path, ray_local):
    kept = unrelated_functions(3)
    write_jsonl(tmp_path / "f.jsonl", PLANTED + kept)
    (tmp_path / "sources.toml").write_text('[[functions]]\npath = "f.jsonl"\n')
    root = str(tmp_path / "root")

    def night(decontaminator: Decontaminator):
        functions = FunctionsConfig(sandbox="process", chunk_size=2, decontaminate=decontaminator)
        return refresh(str(tmp_path / "sources.toml"), root, RefreshConfigs(functions=functions), report=False)

    night(Decontaminator())
    assert {row["source_id"] for row in table_rows(root, "traces")} == {r["id"] for r in PLANTED + kept}
    benchmark = write_jsonl(tmp_path / "bench.jsonl", ITEMS)
    decontaminator = Decontaminator.from_files([benchmark])
    result = night(decontaminator)
    assert not result.failed
    assert {row["source_id"] for row in table_rows(root, "traces")} == {r["id"] for r in kept}
    rows = {row["dropped_id"]: row["item_id"] for row in table_rows(root, "contaminated")}
    assert rows == PLANTED_ITEM
    manifest = open_dataset(root, "").manifest
    sha256 = decontaminator.benchmarks[0].sha256
    recorded = manifest["config"]["trace-functions"]["decontaminate"]["benchmarks"]
    assert recorded == [{"path": benchmark, "sha256": sha256}]
    assert f"  {benchmark} (sha256 {sha256[:12]}): 3  minhash 3" in summarize(root)
