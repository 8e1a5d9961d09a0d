"""A Go program as a `go_programs` row: its source text, content hash, mode, module path and timeout.

Read on the worker from the program directory, the same files the harness copies (schemas/go_programs.py
says which and how the hash is computed), so every go_runs row can name its program by hash.
"""

from pipeline.sources.go_programs import GoProgram, program_files, program_hash


def program_row(program: GoProgram, timeout_s: float) -> dict:
    """The go_programs row of `program`, which ran with per-run timeout `timeout_s`."""
    files = program_files(program.path)
    return {
        "program_id": program.program_id,
        "program_hash": program_hash(files),
        "mode": program.mode,
        "module_path": program.module_path,
        "files": [{"path": name, "text": data.decode("utf-8", "replace")} for name, data in files],
        "timeout_s": float(timeout_s),
        "timeout_source": program.timeout_source,
    }
