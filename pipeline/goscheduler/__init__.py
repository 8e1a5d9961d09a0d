"""The Go scheduler as data (docs/architecture.md §9): which events are scheduler events, the state they leave a
goroutine in (`events`), and the rules every sequence of them keeps (`validity`). Pure functions, no I/O: the Go
stages, the packed format and evaluation share them, as the Python side shares pipeline/debugger/."""
