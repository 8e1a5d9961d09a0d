"""Repository tracing: clone, install, run the suite under the tracer, cut entries."""
