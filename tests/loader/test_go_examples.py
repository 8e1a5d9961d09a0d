"""Go examples in the packed data: the prefix as text, the next event's token carrying its empirical counts."""

import numpy as np

from pipeline.engine.reader import table_rows
from pipeline.loader import PackedLoader, load_tokenizer
from pipeline.stages.pack.go_examples import GO_NEXT, GO_PROGRAM, OUTCOME_TOKENS
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
