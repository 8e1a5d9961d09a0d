"""The packing job: whole documents back, states never cut, the loss on exactly the predicted states."""

import itertools
import json
import re

import pytest
from loader_helpers import document_pieces, pack

from pipeline.debugger.language import ACTIONS, ENDS, EVENT_TOKENS, FRAME_SEP, TRACE_END, parse
from pipeline.engine.reader import table_rows
from pipeline.format.split import is_heldout
from pipeline.inspect import summarize
from pipeline.kinds.pack import MIB, bpe_sample
from pipeline.loader import load_tokenizer

STATE_STARTS = (*EVENT_TOKENS.values(), *ENDS.values())
STATE = re.compile(
    "^(?:%s).*?(?:%s|%s)$" % ("|".join(map(re.escape, STATE_STARTS)), re.escape(FRAME_SEP), re.escape(TRACE_END)),
    re.DOTALL,
)


def _runs(flags) -> list[tuple[int, int]]:
    """[start, stop) of every run of 1s."""
    edges = [0, *itertools.accumulate(len(list(group)) for _, group in itertools.groupby(flags))]
    return [(edges[i], edges[i + 1]) for i, (flag, _) in enumerate(itertools.groupby(flags)) if flag]


@pytest.fixture(scope="module")
def trajectories(python_dataset) -> dict[str, dict]:
    return {row["trajectory_id"]: row for row in table_rows(python_dataset, "trajectories")}


def _check_documents_come_back(packed: str, trajectories: dict[str, dict]) -> int:
    """Every packed document decodes to its trajectory's text, its pieces cut only before an action or a
    state; returns how many cuts there are."""
    tokenizer = load_tokenizer(packed)
    pieces = document_pieces(packed)
    assert len(pieces) >= 0.9 * len(trajectories)  # only trajectories with a span longer than a sample drop
    cuts = 0
    for doc_id, found in pieces.items():
        sizes = [len(ids) for _, ids, _ in found]
        assert [offset for offset, _, _ in found] == [0, *itertools.accumulate(sizes)][:-1]
        decoded = [tokenizer.decode(ids) for _, ids, _ in found]
        assert "".join(decoded) == trajectories[doc_id]["text"]
        for text in decoded[1:]:
            cuts += 1
            assert text.startswith((*ACTIONS.values(), *STATE_STARTS, TRACE_END)), text[:80]
    return cuts


def test_decoding_a_documents_pieces_gives_back_its_text_and_a_state_is_never_cut(packed, trajectories):
    assert _check_documents_come_back(packed, trajectories) > 0  # 512-token samples do cut long trajectories


def test_the_default_mask_covers_exactly_the_states_actions_lead_to(packed, trajectories):
    tokenizer = load_tokenizer(packed)
    for doc_id, found in document_pieces(packed).items():
        ids = [token for _, piece, _ in found for token in piece]
        mask = [flag for _, _, piece in found for flag in piece]
        masked = [tokenizer.decode(ids[start:stop]) for start, stop in _runs(mask)]
        text = trajectories[doc_id]["text"]
        assert len(masked) == len(parse(text).actions) == len(trajectories[doc_id]["actions"])
        assert all(STATE.match(state) for state in masked), masked
        unmasked = "".join(tokenizer.decode(ids[start:stop]) for start, stop in _runs([1 - f for f in mask]))
        assert sorted(unmasked + "".join(masked)) == sorted(text)


def test_samples_have_seq_len_tokens_of_one_group_padded_without_loss(packed):
    for row in table_rows(packed, "packed"):
        assert len(row["input_ids"]) == len(row["loss_mask"]) == 512
        assert row["group"] in ("function/forward", "function/inverse")
        assert not any(row["loss_mask"][row["n_tokens"] :])


def test_mode_all_masks_every_token_but_the_padding(python_dataset, tmp_path):
    out = pack(python_dataset, str(tmp_path / "all"), 512, loss="all")
    for row in table_rows(out, "packed"):
        assert row["loss_mask"] == [1] * row["n_tokens"] + [0] * (512 - row["n_tokens"])


def test_a_bpe_packing_gives_the_documents_back_exactly_too(python_dataset, trajectories, tmp_path):
    out = pack(python_dataset, str(tmp_path / "bpe"), 512, tokenizer="bpe", vocab_size=600)
    assert load_tokenizer(out).vocab_size == 600
    _check_documents_come_back(out, trajectories)


def test_pack_counts_the_trajectories_it_holds_out_and_its_summary_says_how_many(python_dataset, packed, tmp_path):
    held = pack(python_dataset, str(tmp_path / "held"), 512, tokenizer="bytes", holdout=0.3)
    stats = json.loads(open(f"{held}/manifest.json").read())["stats"]["pack"]
    sources = [row["source_id"] for row in table_rows(python_dataset, "trajectories", ["source_id"])]
    held_out = sum(is_heldout(source, 0.3) for source in sources)
    assert 0 < stats["dropped"]["held_out"] == held_out < len(sources)
    assert stats["in"] == json.loads(open(f"{packed}/manifest.json").read())["stats"]["pack"]["in"]  # each counted once
    assert re.search(rf"pack +in +{stats['in']} .*dropped: held_out {held_out}\b", summarize(held))


def test_a_bpe_reads_every_kth_shard_of_a_large_corpus_and_all_of_a_small_one():
    def shards(sizes: list[int]) -> list[dict]:
        return [{"path": f"trajectories/part-{i:05d}-0000.parquet", "bytes": size} for i, size in enumerate(sizes)]

    small = shards([MIB] * 10)
    assert bpe_sample(small) == [shard["path"] for shard in small]
    large = shards([32 * MIB] * 7)  # 224 MiB: every 4th of them
    assert bpe_sample(large) == [large[i]["path"] for i in (0, 4)]
    assert bpe_sample([]) == []


def test_packing_the_same_data_again_writes_the_same_shards(python_dataset, packed, tmp_path):
    first = json.loads(open(f"{packed}/manifest.json").read())["tables"]["packed"]["shards"]
    again = pack(python_dataset, str(tmp_path / "again"), 512)
    assert json.loads(open(f"{again}/manifest.json").read())["tables"]["packed"]["shards"] == first
