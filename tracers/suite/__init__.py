"""Tracing a repository's test suite: the entry tracer on either backend, the pytest plugin, the repository's code."""
