"""The function tracer: its capture, its two backends (sys.settrace, sys.monitoring) and the choice between them."""
