"""Go concurrency: build the harness, run programs N times, parse, compute next-event distributions."""

# The tables the Go stages write (trace-go and rederive-go alike).
GO_TABLES = ("go_programs", "go_runs", "go_traces", "go_next_event", "go_trajectories", "failures")
