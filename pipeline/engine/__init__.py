"""The engine: run units exactly once, write shards and completion records, commit the manifest last."""
