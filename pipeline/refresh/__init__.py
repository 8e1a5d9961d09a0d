"""The nightly refresh: a sources file → only the units not yet published → a new committed version."""
