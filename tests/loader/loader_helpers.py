"""Helpers of the loader tests: run the packing job; read a packed dataset back as its documents' pieces."""

from pipeline.engine.job import run_job
from pipeline.engine.reader import table_rows
from pipeline.kinds.pack import PackConfig, PackKind
from pipeline.stages.pack.packing import PackSettings


def pack(source: str, out: str, seq_len: int, *, loss: str = "states", **settings) -> str:
    """Run `tracegen pack` on `source` into `out`; returns `out`."""
    run_job(PackKind(), source, PackConfig(packing=PackSettings(seq_len=seq_len, loss=loss), **settings), out)
    return out


def document_pieces(packed: str) -> dict[str, list[tuple[int, list[int], list[int]]]]:
    """{doc_id: [(offset in the document, token ids, loss mask) of each piece, by offset]} over every sample."""
    found: dict[str, list] = {}
    for row in table_rows(packed, "packed"):
        bounds = [*row["doc_starts"], row["n_tokens"]]
        for i, doc_id in enumerate(row["doc_ids"]):
            begin, end = bounds[i], bounds[i + 1]
            found.setdefault(doc_id, []).append(
                (row["doc_offsets"][i], row["input_ids"][begin:end], row["loss_mask"][begin:end])
            )
    return {doc_id: sorted(pieces) for doc_id, pieces in found.items()}
