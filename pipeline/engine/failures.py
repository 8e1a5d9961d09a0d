"""Failure rows (docs/architecture.md §5): every input that fails becomes one, never an exception or a silent drop."""


def failure_row(
    unit_id: str,
    source_id: str | None,
    stage: str,
    error_type: str,
    message: str,
    input_ref: str,
    stderr_tail: str | None = None,
) -> dict:
    """A row of the `failures` table."""
    return {
        "unit_id": unit_id,
        "source_id": source_id,
        "stage": stage,
        "error_type": error_type,
        "message": message,
        "stderr_tail": stderr_tail,
        "input_ref": input_ref,
    }
