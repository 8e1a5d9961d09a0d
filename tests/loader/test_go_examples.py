"""Go examples in the packed data: the prefix as text, the next event's token carrying its empirical counts; and
Go trajectory windows, a soft target on every step's type token."""

import numpy as np
from loader_helpers import pack

from pipeline.engine.reader import open_dataset, table_rows
from pipeline.format.go_tokens import GO_NEXT, GO_PROGRAM, GO_ROLLOUT, OUTCOME_TOKENS
from pipeline.loader import PackedLoader, load_tokenizer
from schemas.go_next_event import OUTCOMES


def test_every_exact_prefix_row_is_an_example_whose_target_is_its_counts(go_dataset, packed_go):
    rows = {
        f"{r['program_id']}:exact:{r['depth']}:{r['prefix_hash']}": r
        for r in table_rows(go_dataset, "go_next_event")
        if r["prefix_kind"] == "exact"
    }
    tokenizer = load_tokenizer(packed_go)
    seen = set()
    for sample in table_rows(packed_go, "packed"):
        if sample["group"] == "go_trajectory":
            continue  # test_every_trajectory_window_is_a_document_with_a_target_per_step
        assert sample["group"] == "go" and len(sample["go_positions"]) == len(sample["doc_ids"])
        bounds = [*sample["doc_starts"], sample["n_tokens"]]
        for i, doc_id in enumerate(sample["doc_ids"]):
            row, position = rows[doc_id], sample["go_positions"][i]
            text = tokenizer.decode(sample["input_ids"][bounds[i] : position])
            assert text.startswith(GO_PROGRAM + row["program_id"]) and text.endswith(GO_NEXT)
            assert text.count("<|go_Go") == row["depth"]  # one type token per prefix event
            counts = [row["counts"][name] for name in OUTCOMES]
            assert sample["go_counts"][i] == counts and sample["go_n"][i] == row["n"] == sum(counts)
            best = OUTCOMES[int(np.argmax(counts))]
            assert sample["input_ids"][position] == tokenizer.special_ids[OUTCOME_TOKENS[best]]
            assert [j for j in range(bounds[i], bounds[i + 1]) if sample["loss_mask"][j]] == [position]
            seen.add(doc_id)
    assert seen == set(rows)


def test_every_trajectory_window_is_a_document_with_a_target_per_step(go_dataset, packed_go):
    rows = {
        f"{r['program_id']}:trajectory:{r['depth']}:{r['n_steps']}:{r['window_hash']}": r
        for r in table_rows(go_dataset, "go_trajectories")
    }
    tokenizer = load_tokenizer(packed_go)
    seen = set()
    for sample in table_rows(packed_go, "packed"):
        if sample["group"] != "go_trajectory":
            continue
        bounds = [*sample["doc_starts"], sample["n_tokens"]]
        targets = list(zip(sample["go_positions"], sample["go_counts"], sample["go_n"], strict=True))
        for i, doc_id in enumerate(sample["doc_ids"]):
            row = rows[doc_id]
            mine = [target for target in targets if bounds[i] <= target[0] < bounds[i + 1]]
            assert len(mine) == row["n_steps"]
            head = tokenizer.decode(sample["input_ids"][bounds[i] : mine[0][0]])
            assert head.startswith(GO_PROGRAM + row["program_id"]) and head.endswith(GO_ROLLOUT)
            assert head.count("<|go_Go") == row["depth"]  # the whole prefix fits in 4096 tokens here
            for (position, counts, n), step in zip(mine, row["steps"], strict=True):
                assert counts == [step["counts"][name] for name in OUTCOMES] and n == step["n"]
                assert sample["input_ids"][position] == tokenizer.special_ids[OUTCOME_TOKENS[step["event"]]]
            seen.add(doc_id)
    assert seen == set(rows) and rows


def test_the_loader_emits_the_soft_targets_at_their_positions(packed_go):
    loader = PackedLoader(packed_go, 2)
    support = loader.go_event_token_ids()
    for micro in loader:
        at = micro["go_positions"] >= 0
        rows, slots = np.nonzero(at)
        tokens = micro["input_ids"][rows, micro["go_positions"][rows, slots]]
        assert np.isin(tokens, support).all()
        assert (micro["go_counts"][at].sum(axis=1) == micro["go_n"][at]).all()
        assert (micro["go_n"][~at] == 0).all()


def test_a_held_out_program_has_neither_examples_nor_trajectory_documents(go_dataset, packed_go, tmp_path):
    # pingpong_unbuffered's split hash is 0.37, select_schedule_dependent's 0.44: a 0.4 holdout keeps only the latter
    packed = pack(go_dataset, str(tmp_path / "held"), 4096, holdout=0.4)
    programs = {
        (sample["group"], doc_id.split(":")[0])
        for sample in table_rows(packed, "packed")
        for doc_id in sample["doc_ids"]
    }
    assert programs == {("go", "select_schedule_dependent"), ("go_trajectory", "select_schedule_dependent")}
    stats, whole = (open_dataset(path, "").manifest["stats"]["pack"] for path in (packed, packed_go))
    assert stats["dropped"]["held_out"] > 0 and stats["in"] == whole["in"]  # held out: counted, not lost
