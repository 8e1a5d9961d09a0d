"""What a collection run says is missing, and which distribution provides it. Pure functions, standard library only.

`missing(output, src)` reads `pytest --collect-only` output for:

- `No module named 'x'` (a test module's or conftest's import, `ImportError while loading conftest`, a plugin
  of `-p`/`pytest_plugins`); `No module named 'x.y'` is the top-level `x`. A module the repository holds
  (`own_modules`: a package directory, a namespace directory of .py files, a .py or extension file anywhere in
  the source tree) is not missing: its import failed for another reason. Nor is a module of the standard
  library, except `distutils` (setuptools provides it since 3.12).
- `unrecognized arguments: --cov ...` (an `addopts` option of a plugin that is not installed): OPTION_PLUGINS.
- `Unknown config option: asyncio_mode` (an ini key of a plugin that is not installed): INI_PLUGINS.

`distribution(module, dotted)` maps a module to the distribution that provides it: MODULE_DISTRIBUTIONS for
the well-known names that differ (the longest dotted prefix of the import statement that failed wins, so
`google.protobuf` is protobuf), else the module name itself. `AMBIGUOUS` names (`google`) are never guessed.
`declared(module, names)` prefers what the repository declares itself (an extra's `railroad-diagrams` for
`import railroad`: the name, or the name followed by `-...`) over that guess.
"""

import os
import re
import sys

MODULE_DISTRIBUTIONS = {
    "Bio": "biopython",
    "Crypto": "pycryptodome",
    "Cryptodome": "pycryptodomex",
    "MySQLdb": "mysqlclient",
    "OpenGL": "PyOpenGL",
    "OpenSSL": "pyOpenSSL",
    "PIL": "Pillow",
    "attr": "attrs",
    "bs4": "beautifulsoup4",
    "cv2": "opencv-python-headless",
    "dateutil": "python-dateutil",
    "distutils": "setuptools",
    "dns": "dnspython",
    "docx": "python-docx",
    "dotenv": "python-dotenv",
    "fitz": "PyMuPDF",
    "git": "GitPython",
    "github": "PyGithub",
    "google.protobuf": "protobuf",
    "jose": "python-jose",
    "jwt": "PyJWT",
    "kafka": "kafka-python",
    "ldap": "python-ldap",
    "magic": "python-magic",
    "memcache": "python-memcached",
    "mpl_toolkits": "matplotlib",
    "multipart": "python-multipart",
    "nacl": "PyNaCl",
    "pkg_resources": "setuptools",
    "pptx": "python-pptx",
    "psycopg2": "psycopg2-binary",
    "serial": "pyserial",
    "skimage": "scikit-image",
    "sklearn": "scikit-learn",
    "slugify": "python-slugify",
    "socks": "PySocks",
    "usb": "pyusb",
    "yaml": "PyYAML",
    "zmq": "pyzmq",
}
AMBIGUOUS = frozenset(("google", "azure", "backports", "jaraco", "zope", "ruamel"))
NOT_MISSING_STDLIB = frozenset(("distutils",))
OPTION_PLUGINS = {
    "--cov": "pytest-cov",
    "--no-cov": "pytest-cov",
    "-n": "pytest-xdist",
    "--numprocesses": "pytest-xdist",
    "--dist": "pytest-xdist",
    "--timeout": "pytest-timeout",
    "--benchmark": "pytest-benchmark",
    "--reruns": "pytest-rerunfailures",
    "--asyncio-mode": "pytest-asyncio",
    "--doctest-plus": "pytest-doctestplus",
    "--doctest-rst": "pytest-doctestplus",
    "--remote-data": "pytest-remotedata",
    "--mpl": "pytest-mpl",
    "--randomly": "pytest-randomly",
    "--html": "pytest-html",
    "--hypothesis": "hypothesis",
    "--mypy": "pytest-mypy",
    "--flake8": "pytest-flake8",
    "--black": "pytest-black",
    "--isort": "pytest-isort",
    "--ds": "pytest-django",
    "--reuse-db": "pytest-django",
    "--nomigrations": "pytest-django",
    "--snapshot-update": "syrupy",
    "--forked": "pytest-forked",
    "--instafail": "pytest-instafail",
}
INI_PLUGINS = {
    "asyncio_mode": "pytest-asyncio",
    "asyncio_default_fixture_loop_scope": "pytest-asyncio",
    "timeout": "pytest-timeout",
    "env": "pytest-env",
    "DJANGO_SETTINGS_MODULE": "pytest-django",
    "django_find_project": "pytest-django",
    "mock_use_standalone_module": "pytest-mock",
    "mpl-baseline-path": "pytest-mpl",
    "doctest_plus": "pytest-doctestplus",
    "remote_data_strict": "pytest-remotedata",
    "flake8-max-line-length": "pytest-flake8",
}
SKIP_DIRS = frozenset((".git", ".hg", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__", ".eggs"))
MAX_WALK = 50_000
MAX_MISSING = 10

NO_MODULE = re.compile(r"No module named '([A-Za-z_][A-Za-z0-9_.]*)'")
IMPORT_LINE = re.compile(r"^\s*(?:from\s+([A-Za-z_][\w.]*)\s+import\b|import\s+([A-Za-z_][\w.]*))")
UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)")
UNKNOWN_INI = re.compile(r"Unknown config option: ([A-Za-z0-9_.-]+)")
EXTENSION = re.compile(r"^([A-Za-z_]\w*)(?:\.[\w-]+)?\.(?:so|pyd)$")


def own_modules(src):
    """Module names the source tree holds (bounded walk): every .py or extension module's, every package
    directory's (with `__init__.py`), and a namespace directory's at the top (the root, `src/`, `lib/`)."""
    names, seen = set(), 0
    top = {os.path.join(src, "src"), os.path.join(src, "lib"), src}
    for parent, dirs, files in os.walk(src):
        dirs[:] = [name for name in dirs if name not in SKIP_DIRS]
        seen += len(dirs) + len(files)
        if seen > MAX_WALK:
            break
        modules = {name[:-3] for name in files if name.endswith(".py")}
        modules |= {match.group(1) for match in map(EXTENSION.match, files) if match}
        names |= modules
        if parent != src and ("__init__" in modules or (modules and os.path.dirname(parent) in top)):
            names.add(os.path.basename(parent))
    return names


def missing(output, own=frozenset()):
    """[(what, distribution)] the collection `output` says is missing, each once, at most MAX_MISSING: a module
    (`yaml`, `PyYAML`), an option (`--cov`, `pytest-cov`) or an ini key (`ini:timeout`, `pytest-timeout`).
    `distribution` is None where nothing is guessed (an ambiguous namespace)."""
    found, lines = {}, output.splitlines()
    for number, line in enumerate(lines):
        for match in NO_MODULE.finditer(line):
            module = match.group(1).split(".")[0]
            if module in own or (module in sys.stdlib_module_names and module not in NOT_MISSING_STDLIB):
                continue
            found.setdefault(module, distribution(module, import_context(lines, number, module)))
        unrecognized = UNRECOGNIZED.search(line)
        for option in unrecognized.group(1).split() if unrecognized else ():
            plugin = option_plugin(option)
            if plugin:
                found.setdefault(option.split("=")[0], plugin)
        ini = UNKNOWN_INI.search(line)
        if ini and ini.group(1) in INI_PLUGINS:
            found.setdefault("ini:" + ini.group(1), INI_PLUGINS[ini.group(1)])
    return list(found.items())[:MAX_MISSING]


def import_context(lines, number, module):
    """The dotted name of the import statement shown just above line `number` when it starts with `module`."""
    for line in reversed(lines[max(0, number - 3) : number]):
        match = IMPORT_LINE.match(line)
        if match:
            dotted = match.group(1) or match.group(2)
            return dotted if dotted.split(".")[0] == module else module
    return module


def distribution(module, dotted=None):
    """The distribution that provides `module` (see the module's doc); None when it is ambiguous."""
    parts = (dotted or module).split(".")
    for size in range(len(parts), 0, -1):
        prefix = ".".join(parts[:size])
        if prefix in MODULE_DISTRIBUTIONS:
            return MODULE_DISTRIBUTIONS[prefix]
    return None if module in AMBIGUOUS else module


def declared(module, names):
    """The distribution of `names` (the repository's declared requirements, normalized) that `module` most
    likely comes from: the one named like it, else the shortest named `module-...`; None when none is."""
    stem = re.sub(r"[-_.]+", "-", module).lower()
    if stem in names:
        return stem
    prefixed = sorted((name for name in names if name.startswith(stem + "-")), key=len)
    return prefixed[0] if prefixed else None


def option_plugin(option):
    name = option.split("=")[0]
    for known, plugin in OPTION_PLUGINS.items():
        if name == known or (known.startswith("--") and name.startswith(known + "-")):
            return plugin
    return None


def collected(output):
    """How many tests `pytest --collect-only -q` reports collected; None when it reports no count."""
    counts = re.findall(r"(?m)^(?:=+ )?(\d+)(?:/\d+)? tests? collected|^(?:=+ )?no tests collected", output)
    if not counts:
        return None
    last = counts[-1]
    return int(last) if last else 0
