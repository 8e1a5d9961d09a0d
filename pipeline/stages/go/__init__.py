"""Go concurrency: build the harness, run programs N times, parse, compute next-event distributions."""
