"""Fixtures of the repository-tracing tests (helpers in repo_fixtures.py; repositories are real git repos)."""
