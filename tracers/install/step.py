"""The `install` step of a repository (network on, run by the sandbox's base Python). Standard library only.

It creates a virtual environment and installs pytest and the repository into it, and writes
`{"ok", "timed_out", "steps": [{"command", "returncode", "output"}], "how"}` to the request's `result` path.
With `index_socket` in the request (the sandbox has no network of its own), a relay on the sandbox's loopback
forwards pip's proxy connections to the host's index proxy on that unix socket
(tracers/install/index_relay.py, pipeline/sandbox/index_proxy.py), so the index is the one host a build reaches.

The default install, by rules (no per-repository configuration), recorded in `how`:

1. **Sources.** The test requirements are read as the repository's CI would (tracers/install/sources.py, in its
   SOURCE_KINDS order: PEP 735 dependency groups, the package's test extra, requirements files, tox, hatch, nox).
2. **Steps.** One pip run installs pytest, the package (when the repository is one: editable from the source copy,
   `pip install -e src[extras]`; a regular install from then on when the editable build fails) and every source.
   When it fails, the next step is tried, the first that installs wins (`how.step`):
   `all` -> `without:<labels>` (one more source dropped at each try, at most MAX_DROPS: first a source holding a
   requirement pip's error names, else by DROP_ORDER, most suspect first: requirements files, nox, tox, hatch,
   dependency groups, the extra; never the last source) -> `relaxed` (every requirement relaxed to its bare name,
   requirements.relax; the package without extras) -> `minimal` (pytest and the package). The package must
   install for any step to count; when `minimal` fails too, the install fails. A step whose pip command is one
   already tried is skipped.
3. **Preparation.** What the repository's CI runs in the tree between installing and testing — its tox test env's
   `commands_pre` (compiling translation catalogues, generating files the tests read; tracers/install/tox.py) —
   runs in the source copy with the venv first on PATH, each command recorded (`how.prepared`); one that fails is
   recorded and the install stands.
4. **Repairs.** `pytest --collect-only -q -p no:cacheprovider` runs in the source copy with the repository's own
   configuration (and the manifest's `test` arguments); what it reports missing (tracers/install/repair.py: modules,
   plugin options, plugin ini keys) is pip installed and collection runs again, MAX_ROUNDS times at most. A module
   no distribution on the index provides (or whose distribution is the repository itself) is recorded and ends
   the rounds; the install stands.

Everything runs within the request's `budget_s` (the host gives install_timeout_s less a margin): each command
gets what is left of it, no step starts with less than MIN_STEP_S left (tracers/install/commands.py), and
`timed_out` says the budget ran out.
The copy has no `.git` (so no tags): VERSION_ENV and scm_version_env give dynamic-version backends a version. A
default install whose build takes its version from VCS tags (VCS_VERSIONING) gets the project's latest release on
the index (`pip index versions`), as a tagged checkout would be versioned near it, so a test requirement's own
`>=` on the project holds (freezegun needs python-dateutil>=2.7: built as 0.0.0, pip backtracks freezegun to a
release whose build fails); FALLBACK_VERSION when the index has no release of it.

A manifest `install` list replaces the default: pytest, then each command under `sh -c` in the source copy with
the venv first on PATH (`how.step` is `manifest`, no repairs).

`how` = {"sources": [label], "step": str, "editable": bool | null, "attempts": [{"step", "editable", "ok",
"error"}], "prepared": [{"command", "ok"}], "repairs": [{"round", "modules", "installed", "unresolved", "ok"}],
"collected": int | null, "notes": [str]}.
"""

import json
import os
import re
import sys
import tempfile
import time

from tracers.install.commands import Runner, error_summary
from tracers.install.index_relay import start_index_relay
from tracers.install.repair import collected, declared, missing, own_modules
from tracers.install.requirements import normalize, relaxed_lines, strings
from tracers.install.sources import Reader

PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "PIP_PROXY")
FALLBACK_VERSION = "0.0.0"
VERSION_ENV = {  # builds from a copy without .git: scm-based versions read these (and scm_version_env)
    name: FALLBACK_VERSION
    for name in (
        "PDM_BUILD_SCM_VERSION",
        "PDM_PEP517_SCM_VERSION",
        "PBR_VERSION",
        "POETRY_DYNAMIC_VERSIONING_BYPASS",
        "UV_DYNAMIC_VERSIONING_BYPASS",
    )
}
# Build requirements that version a package from VCS tags (normalized names, matched within `build-system.requires`).
VCS_VERSIONING = (
    "setuptools-scm",
    "hatch-vcs",
    "pdm-backend",
    "pdm-pep517",
    "poetry-dynamic-versioning",
    "uv-dynamic-versioning",
    "versioningit",
    "pbr",
    "dunamai",
    "setuptools-git-versioning",
)
INDEX_QUERY_S = 60
RELEASED = re.compile(r"^\S+ \(([^()\s]+)\)\s*$", re.M)  # `NAME (VERSION)`, after pip's warnings
DROP_ORDER = ("requirements", "nox", "tox", "hatch", "uv", "pdm", "poetry", "dependency-groups", "extra")
MAX_DROPS = 4
MAX_ROUNDS = 3
COLLECT_TIMEOUT_S = 60.0
PREPARE_TIMEOUT_S = 300.0  # one of the repository's own preparation commands (tox commands_pre)
EDITABLE_FAILED = re.compile(  # pip's words when the editable build itself failed (not a dependency)
    r"'build_editable' hook|cannot be installed in editable mode|setup\.py develop\b[^\n]*(error|fail)"
    r"|(build editable|editable metadata|editable for)\b[^\n]*(did not run successfully|error)",
    re.I,
)
NAMED_IN_ERROR = re.compile(
    r"(?:satisfies the requirement|No matching distribution found for|The user requested|depends on)\s+"
    r"([A-Za-z0-9][A-Za-z0-9._-]*)"
)
COLLECT = (
    "import importlib.util, sys\n"
    "args = sys.argv[1:]\n"
    "if importlib.util.find_spec('pytest_cov'): args.append('--no-cov')\n"
    "if importlib.util.find_spec('xdist'): args += ['-n', '0']\n"
    "import pytest\n"
    "sys.exit(pytest.main(args))\n"
)


def _pip_version_ok():
    try:
        import pip

        return tuple(int(part) for part in pip.__version__.split(".")[:2]) >= (22, 3)
    except Exception:
        return False


def is_package(src):
    return any(os.path.isfile(os.path.join(src, name)) for name in ("pyproject.toml", "setup.py", "setup.cfg"))


def scm_version_env(project, backend, version=FALLBACK_VERSION):
    """The environment that versions a build from a copy without history as `version`: setuptools-scm's pretend
    version for the package alone (`..._FOR_<NAME>`: a dependency built from an sdist keeps its own), for every
    build when the name is unknown or the backend is hatch-vcs, which asks setuptools-scm without a name; and
    VERSION_ENV's names (pdm-backend, pbr, poetry and uv dynamic versioning). flit's and setuptools'
    `attr:`/file versions need no repository history."""
    env = {name: version for name in VERSION_ENV}
    if project and "hatch-vcs" not in normalize(backend):
        env["SETUPTOOLS_SCM_PRETEND_VERSION_FOR_" + re.sub(r"[-_.]+", "_", project).upper()] = version
    else:
        env["SETUPTOOLS_SCM_PRETEND_VERSION"] = version
    return env


def versions_from_vcs(backend):
    """Whether the build requirements `backend` (names joined by spaces) take the version from VCS tags."""
    names = {normalize(re.split(r"[^A-Za-z0-9._-]", word, maxsplit=1)[0]) for word in backend.split()}
    return bool(names & set(VCS_VERSIONING))


def next_to_drop(kept, output, project=""):
    """The source to drop next: the most suspect holding a requirement pip's error names, else the most
    suspect (DROP_ORDER; within a kind, the last read)."""
    order = sorted(kept, key=lambda source: (DROP_ORDER.index(source.kind), -kept.index(source)))
    named = {normalize(name) for name in NAMED_IN_ERROR.findall(output)} - {project, "pytest"}
    culprits = [source for source in order if source.names() & named]
    return (culprits or order)[0]


def install(request):
    venv_dir, src = request["venv"], request["src"]
    cache = request.get("pip_cache")
    env = {key: value for key, value in os.environ.items()}
    env.update(VERSION_ENV)
    env.update(
        {
            "PIP_NO_INPUT": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_PROGRESS_BAR": "off",
            "PYTHONDONTWRITEBYTECODE": "1",
            "VIRTUAL_ENV": venv_dir,
            "PATH": os.path.join(venv_dir, "bin") + os.pathsep + env.get("PATH", "/usr/bin:/bin"),
        }
    )
    if request.get("index_socket"):
        proxy = "http://127.0.0.1:%d" % start_index_relay(request["index_socket"])
        env.update({key: proxy for key in PROXY_ENV})
        env.pop("NO_PROXY", None)
        env.pop("no_proxy", None)
    if cache:
        env["PIP_CACHE_DIR"] = cache
    else:
        env["PIP_NO_CACHE_DIR"] = "1"
    commands = request.get("commands")
    steps = []
    runner = Runner(env, steps, time.monotonic() + float(request.get("budget_s") or 24 * 3600))
    python = os.path.join(venv_dir, "bin", "python")
    external_pip = commands is None and _pip_version_ok()
    venv_argv = [sys.executable, "-m", "venv"] + (["--without-pip"] if external_pip else []) + [venv_dir]
    ok = runner.run(venv_argv, src)[0]
    pip = [sys.executable, "-m", "pip", "--python", python] if external_pip else [python, "-m", "pip"]
    how = manifest_how()
    if ok and commands is None:
        ok, how = DefaultInstall(runner, pip, src, python, request.get("test_args") or []).run()
    elif ok:
        ok = runner.run(pip + ["install", "pytest"], src)[0]
    for command in commands or []:
        if not ok:
            break
        ok = runner.run(command, src, label=command)[0]
    with open(request["result"], "w", encoding="utf-8") as handle:
        json.dump({"ok": ok, "timed_out": runner.timed_out, "steps": steps, "how": how}, handle)


def manifest_how():
    """`how` of a manifest `install`: no sources read, no steps, no repairs."""
    return {
        "sources": [],
        "step": "manifest",
        "editable": None,
        "attempts": [],
        "prepared": [],
        "repairs": [],
        "collected": None,
        "notes": [],
    }


class DefaultInstall:
    """The default install's steps and repairs (see the module's doc)."""

    def __init__(self, runner, pip, src, python, test_args):
        self.runner, self.pip, self.src, self.python, self.test_args = runner, pip, src, python, test_args
        self.package = is_package(src)
        self.sources, self.notes, self.project, self.declared, backend = [], [], "", set(), ""
        self.commands = []
        try:
            reader = Reader(src, self.package)
            self.sources, self.notes, self.project = reader.sources(), reader.notes, reader.project
            self.declared = reader.declared_names()
            self.commands = reader.prepare_commands(os.path.dirname(os.path.dirname(python)))
            backend = " ".join(strings(reader.table("build-system").get("requires")))
        except Exception as error:  # a reader's bug costs the sources, never the install
            self.notes = ["sources not read: %s: %s" % (type(error).__name__, error)]
        runner.env.update(scm_version_env(self.project, backend, self.released_version(backend)))
        self.editable = True if self.package else None
        self.attempts, self.tried = [], set()
        self.files = tempfile.mkdtemp(prefix="tracegen-requirements-")

    def run(self):
        step = self.install_steps()
        how = {
            "sources": [source.label for source in self.sources],
            "step": step,
            "editable": self.editable,
            "attempts": self.attempts,
            "prepared": [],
            "repairs": [],
            "collected": None,
            "notes": self.notes,
        }
        if step is not None:
            how["prepared"] = self.prepare()
            how["repairs"], how["collected"] = self.repair()
        return step is not None, how

    def prepare(self):
        """Run what the repository's CI runs in the tree between the install and the tests (its tox test env's
        `commands_pre`), the venv first on PATH; each as {"command", "ok"} (a failure is recorded, the install
        stands; one whose exit status tox ignores counts as ok)."""
        done = []
        for argv, ignore_errors, text in self.commands:
            if self.runner.timed_out:
                break
            ok = self.runner.run(argv, self.src, timeout=PREPARE_TIMEOUT_S, label=text)[0]
            done.append({"command": text[:300], "ok": ok or ignore_errors})
        return done

    def released_version(self, backend):
        """The version a build from VCS tags gets here: the project's latest release on the index, else
        FALLBACK_VERSION (see the module's doc)."""
        if not self.project or not versions_from_vcs(backend):
            return FALLBACK_VERSION
        ok, output = self.runner.run(self.pip + ["index", "versions", self.project], self.src, timeout=INDEX_QUERY_S)
        found = RELEASED.search(output) if ok else None
        return found.group(1) if found else FALLBACK_VERSION

    # -- steps ---------------------------------------------------------------------------------------------------
    def install_steps(self):
        """The name of the step that installed, or None."""
        if self.attempt("all", self.sources):
            return "all"
        kept, dropped = list(self.sources), []
        while len(kept) > 1 and len(dropped) < MAX_DROPS and not self.runner.timed_out:
            victim = next_to_drop(kept, self.last_output, self.project)
            kept.remove(victim)
            dropped.append(victim.label)
            step = "without:" + ",".join(dropped)
            if self.attempt(step, kept):
                return step
        if self.sources and self.attempt("relaxed", [], relaxed_lines(self.sources)):
            return "relaxed"
        if self.attempt("minimal", []):
            return "minimal"
        return None

    def attempt(self, step, sources, relaxed=()):
        """Install pytest, the package and `sources` (or the `relaxed` requirement strings); a retry without
        -e when the editable build is what failed."""
        self.last_output = ""
        args = [self.requirements_file(source) for source in sources if source.lines and source.kind != "extra"]
        args = [item for path in args for item in ("-r", path)] + list(relaxed)
        extras = sorted({extra for source in sources for extra in source.extras})
        while True:
            argv = self.pip + ["install", "pytest"] + self.package_args(extras) + args
            if tuple(argv) in self.tried or self.runner.timed_out:
                return False
            self.tried.add(tuple(argv))
            ok, output = self.runner.run(argv, self.src)
            self.attempts.append(
                {"step": step, "editable": self.editable, "ok": ok, "error": None if ok else self.error(output)}
            )
            self.last_output = output
            if ok or not self.editable or not (step == "minimal" or EDITABLE_FAILED.search(output)):
                return ok
            self.editable = False

    def error(self, output):
        return error_summary(output).replace(self.src, "<src>")

    def package_args(self, extras):
        if not self.package:
            return []
        target = self.src + ("[%s]" % ",".join(extras) if extras else "")
        return ["-e", target] if self.editable else [target]

    def requirements_file(self, source):
        path = os.path.join(self.files, re.sub(r"[^A-Za-z0-9_.-]+", "-", source.label)[:100] + ".txt")
        if not os.path.exists(path):
            with open(path, "w", encoding="utf-8") as handle:
                handle.write("\n".join(source.lines) + "\n")
        return path

    # -- repairs -------------------------------------------------------------------------------------------------
    def collect(self):
        paths = [path for path in (os.path.join(self.src, "src"), self.src) if os.path.isdir(path)]
        env = dict(self.runner.env, PYTHONPATH=os.pathsep.join(paths))
        argv = ["--collect-only", "-q", "-p", "no:cacheprovider", "--rootdir", self.src] + list(self.test_args)
        label = "pytest " + " ".join(argv)
        return self.runner.run([self.python, "-c", COLLECT] + argv, self.src, env, COLLECT_TIMEOUT_S, label)[1]

    def repair(self):
        """([repair rounds], tests collected at the end or None)."""
        own, rounds, tried = own_modules(self.src), [], set()
        output = self.collect()
        for number in range(1, MAX_ROUNDS + 1):
            wanted = [(what, self.provider(what, dist)) for what, dist in missing(output, own) if what not in tried]
            if not wanted or self.runner.timed_out:
                break
            tried.update(what for what, _ in wanted)
            usable = [dist for _, dist in wanted if dist and normalize(dist) != self.project]
            installed = self.install_each(list(dict.fromkeys(usable)))
            unresolved = [what for what, dist in wanted if dist not in installed]
            rounds.append(
                {
                    "round": number,
                    "modules": [what for what, _ in wanted],
                    "installed": installed,
                    "unresolved": unresolved,
                    "ok": not unresolved,
                }
            )
            if installed:
                output = self.collect()
            if unresolved:
                break
        return rounds, collected(output)

    def provider(self, what, guess):
        """The distribution to install for `what` collection reported missing: for a module whose guess is its
        own name, one the repository declares under a like name (see tracers/install/repair.py), else the guess."""
        if guess != what or what.startswith(("-", "ini:")):
            return guess
        return declared(what, self.declared) or guess

    def install_each(self, dists):
        """The distributions of `dists` pip installs: all at once, else one at a time."""
        if not dists:
            return []
        if self.runner.run(self.pip + ["install"] + dists, self.src)[0]:
            return dists
        if len(dists) == 1:
            return []
        return [dist for dist in dists if self.runner.run(self.pip + ["install", dist], self.src)[0]]
