"""The comparison scores every variant on the cuts all of them scored, by hand-checkable counts, and writes the
table with a row per variant and per baseline, and the curves' image."""

import json

from pipeline.ablate.compare import compare, scores
from pipeline.ablate.run import STATE
from pipeline.ablate.variants import parse_variant
from pipeline.model.network import ModelConfig

ALL = {"state": True, "event": True, "source": True, "locals": True, "arg": True}
NONE = dict.fromkeys(ALL, False)
EVENT_ONLY = {**NONE, "event": True}


def cut(trace: str, k: int, action: str, model: dict, view: str | None = None) -> dict:
    hits = {"model": model, "copy": NONE, "next_line": EVENT_ONLY, "oracle_structure": ALL}
    return {
        "trace_id": trace,
        "direction": "forward",
        "sample_index": 0,
        "k": k,
        "action": action,
        "view": view,
        "hits": hits,
    }


def test_scores_count_whole_states_components_actions_and_views():
    cuts = [
        cut("t", 0, "step_return", ALL, "output"),
        cut("t", 1, "step_into", EVENT_ONLY),
        cut("u", 0, "step_into", NONE),
    ]
    scored = scores(cuts, "model")
    assert scored["cuts"] == 3
    assert scored["state"] == 1 / 3 and scored["event"] == 2 / 3 and scored["locals"] == 1 / 3
    assert scored["per_action"] == {"step_into": {"cuts": 2, "state": 0.0}, "step_return": {"cuts": 1, "state": 1.0}}
    assert scored["views"] == {"output": {"cuts": 1, "state": 1.0}}
    assert scores(cuts, "oracle_structure")["state"] == 1.0


def write_variant(root, name: str, cuts: list[dict]) -> dict:
    (root / "results").mkdir(exist_ok=True)
    (root / "results" / f"{name}.json").write_text(json.dumps({"step": 2, "cuts": cuts}))
    run = root / "runs" / name
    run.mkdir(parents=True)
    lines = [{"step": s, "tokens": s * 100, "loss": 3.0 - s, "tokens_per_s": 50.0} for s in (1, 2)]
    point = {"state": 0.5, "per_action": {}, "baselines": {"copy": {"step_into": {"cuts": 2, "state": 0.0}}}}
    lines.append({"step": 2, "tokens": 200, "eval": {**point, "cuts": 2}})
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    model = ModelConfig(vocab_size=300, seq_len=64)
    return {
        "variant": parse_variant(name, 64),
        "run": str(run),
        "results": str(root / "results" / f"{name}.json"),
        "steps": 2,
        "model": model,
        "workers": 1,
    }


def test_variants_are_compared_on_their_common_cuts_with_the_baselines(tmp_path):
    (tmp_path / STATE).write_text(json.dumps({"traces": "t", "settings": {}, "options": {}}))
    done = [
        write_variant(
            tmp_path,
            "base",
            [cut("a", 0, "step_into", ALL), cut("b", 0, "step_into", ALL), cut("c", 0, "step_over", NONE)],
        ),
        write_variant(
            tmp_path,
            "other",
            [cut("b", 0, "step_into", NONE), cut("c", 0, "step_over", ALL), cut("d", 0, "step_over", ALL)],
        ),
    ]
    comparison = compare(str(tmp_path), done)
    assert comparison["common_cuts"] == 2  # b and c: a and d were scored by one variant only
    base, other = comparison["variants"]
    assert (base["own_cuts"], other["own_cuts"]) == (3, 3)
    assert base["scores"]["state"] == 0.5 and other["scores"]["state"] == 0.5
    assert base["scores"]["per_action"]["step_into"]["state"] == 1.0
    assert other["scores"]["per_action"]["step_over"]["state"] == 1.0
    assert comparison["baselines"]["next_line"]["event"] == 1.0 and comparison["baselines"]["copy"]["state"] == 0.0
    assert base["loss"] == 1.0 and base["tokens"] == 200 and base["mfu"] is None  # a CPU: no peak to compare with
    table = (tmp_path / "ablation.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[1:]] == [
        "| base",
        "| other",
        "| *copy*",
        "| *next_line*",
        "| *oracle_structure*",
    ]
    assert "2 held-out cuts every variant scored" in table
    assert (tmp_path / "curves.png").stat().st_size > 0
    assert json.loads((tmp_path / STATE).read_text())["comparison"] == comparison
