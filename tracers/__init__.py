"""The code that runs INSIDE the sandbox (bubblewrap, Docker, or a plain process), standard library only.

The host binds this package read-only into every sandbox and runs its entry points with the sandbox's
Python (`python -m tracers.runners.functions`, `python -m tracers.runners.repos`). Its subpackages, each
importing only those before it in this list (and `json_writers`):

- `reprs/`: bounded, deterministic, never-raising reprs of traced values.
- `trace/`: the function tracer: its capture, its two backends (sys.settrace, sys.monitoring), the choice
  between them, and the audit guard that refuses tampering while a call is traced.
- `guard/`: what keeps untrusted code from the tracer and from other runs: sealed copies of the tracer, the
  isolation of function records, a suite's audit guard and its out-of-process watchdog.
- `suite/`: tracing a repository's test suite: the entry tracer (both backends), the pytest plugin, which code
  is the repository's.
- `install/`: installing a repository the way its CI would.
- `runners/`: the sandbox's entry points and the function runner's protocol with the host.
"""
