"""Sources: readers that turn inputs into records, and bad inputs into failure rows."""
