"""What keeps untrusted code away from the tracer and from other runs: seal, isolation, audit guard, watchdog."""
