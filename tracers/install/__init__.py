"""Installing a repository into a fresh venv the way its CI would: its test requirements, fallbacks, repairs."""
