"""Scoring a model (docs/architecture.md §13): `tracegen evaluate` on a dataset's held-out trajectories and Go
distributions (`evaluate`, `baselines`, `go_metrics`, `go_rollouts`) or on a CruxEval-style benchmark file
(`benchmark`, `benchmark_items`, `benchmark_cwm`: the items traced and the predicted inputs executed in the
sandbox)."""
