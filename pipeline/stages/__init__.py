"""Stages (DESIGN.md §3): plain functions from records to rows, with no Ray inside."""
