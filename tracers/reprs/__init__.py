"""The bounded, deterministic, never-raising reprs of traced values (schemas/reprs.md)."""
