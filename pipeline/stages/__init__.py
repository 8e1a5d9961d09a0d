"""Stages (docs/architecture.md §5): plain functions from records to rows, with no Ray inside."""
