"""Package-index source distributions as repositories: `[[repo]] sdist = "name==version"`.

The host fetches the sdist itself, and runs none of its code: no `pip download` (which runs the build backend
to prepare metadata). It asks the index's simple API for the project's page (PEP 691 JSON,
`application/vnd.pypi.simple.v1+json`, else the PEP 503 HTML page), at the index URLs pip would use
(`pipeline.sandbox.index_proxy.index_urls`: `PIP_INDEX_URL`/`PIP_EXTRA_INDEX_URL`, pip.conf, default PyPI; the
first index holding the version wins), through the host's HTTPS proxy (`HTTPS_PROXY`, urllib's own handling)
and with `PIP_CERT` (else `REQUESTS_CA_BUNDLE`, else the system's) as the CA bundle. It picks the sdist file of
exactly that version (the project name normalised, the version as the file names it: PEP 625
`name-version.tar.gz` or a legacy `.tar.gz`/`.zip` name; `.tar.gz` first; a yanked file still counts, as
for pip with an exact pin), downloads it (at most MAX_ARCHIVE_BYTES), checks its sha256 against the index's,
and unpacks it safely: every member a regular file, directory or link staying inside the one top-level
directory, which is stripped; no absolute names, no `..`, no devices; at most MAX_MEMBERS members and
MAX_UNPACKED_BYTES bytes (counted while the gzip stream is inflated, so a bomb stops at the cap); tarfile's
`data` filter on top.

Layout under the cache root:
    trees/{sha256}/           the unpacked tree (renamed into place once complete: never half-written)
    pins/{name}-{version}.json  what the index said the pin is (file name, URL, sha256)
    locks/{name}-{version}.lock flock held while a pin is fetched (Ray workers on one machine share the cache)
    tmp/                      downloads and unpacks in progress
A `name==version` is immutable: once its pin and tree are here, a checkout makes no network request.

The checkout's `commit` is `sdist-sha256-{hex}` (the archive's hash: a dash, not a colon, so `source_id`
`name@commit:path:qualname` still splits as for a git commit), its `url` the file's URL, its `path` the tree.
Errors are SdistError with `kind` SdistNotFound (no such project, version or sdist file), SdistRejected (a
hash mismatch, an unsafe or oversized archive) or SdistUnreachable (the index could not be read).
"""

import gzip
import hashlib
import html.parser
import json
import os
import posixpath
import re
import shutil
import ssl
import stat
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from typing import Protocol
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from pipeline.sandbox.index_proxy import index_urls
from pipeline.sources.git_cache import Checkout, file_lock

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
MAX_PAGE_BYTES = 64 << 20  # a project page (some list thousands of files)
MAX_ARCHIVE_BYTES = 64 << 20
MAX_UNPACKED_BYTES = 512 << 20
MAX_MEMBERS = 20_000
TAR_OVERHEAD = 2048  # bytes of tar headers and padding allowed per member on top of MAX_UNPACKED_BYTES
TIMEOUT_S = 60.0
CHUNK = 1 << 16
EXTENSIONS = (".tar.gz", ".zip")  # in order of preference
IDENTITY = "sdist-sha256-"

PIN = re.compile(
    r"\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*==\s*(?P<version>[A-Za-z0-9][A-Za-z0-9.+!_-]*)\s*"
)


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class Response(Readable, Protocol):
    """What urllib's `urlopen` returns, as far as this module uses it."""

    headers: Message

    def geturl(self) -> str: ...
    def __enter__(self) -> "Response": ...
    def __exit__(self, *exc) -> None: ...


Opener = Callable[[str, str], Response]  # (url, Accept header) -> the response (raises urllib's errors)


class SdistError(Exception):
    """The sdist could not be had; `kind` names why (for the failures table)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def parse_pin(text: str) -> tuple[str, str]:
    """(name, version) of `name==version`; ValueError saying what is wrong otherwise."""
    found = PIN.fullmatch(text)
    if found is None:
        raise ValueError(
            f'sdist {text!r} must be `name==version` (one exact version, e.g. "six==1.16.0"; no ranges, '
            f"wildcards or extras)"
        )
    return found["name"], found["version"]


def normalize(name: str) -> str:
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def identity(sha256: str) -> str:
    return IDENTITY + sha256


@dataclass(frozen=True)
class SdistFile:
    filename: str
    url: str
    sha256: str


def pick_sdist(files: list[SdistFile], name: str, version: str) -> SdistFile | None:
    """The sdist of `name` at exactly `version` among a project's files (see the module docstring)."""
    wanted = normalize(name)
    for extension in EXTENSIONS:
        for candidate in files:
            lower = candidate.filename.lower()
            if not lower.endswith(extension):
                continue
            stem = candidate.filename[: -len(extension)]
            if stem.lower().endswith("-" + version.lower()) and normalize(stem[: -len(version) - 1]) == wanted:
                return candidate
    return None


def open_url(url: str, accept: str) -> Response:
    """A GET of `url` through the host's proxy settings and CA bundle (see the module docstring)."""
    cafile = os.environ.get("PIP_CERT") or os.environ.get("REQUESTS_CA_BUNDLE") or None
    context = ssl.create_default_context(cafile=cafile if cafile and os.path.isfile(cafile) else None)
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))
    request = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "tracegen-sdist"})
    return opener.open(request, timeout=TIMEOUT_S)


def redact(url: str) -> str:
    """`url` without user:password@ (index URLs may carry credentials; messages and rows must not)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.hostname or ""
    return urlunsplit(parts._replace(netloc=f"{netloc}:{parts.port}" if parts.port else netloc))


class _Links(html.parser.HTMLParser):
    """The hrefs of a PEP 503 page's anchors (a yanked file is still a candidate: the pin is exact)."""

    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def page_files(body: bytes, content_type: str, page_url: str) -> list[SdistFile]:
    """The files a simple-API project page lists (JSON or HTML), URLs absolute, sha256 '' where not given."""
    files = []
    if content_type.split(";")[0].strip().lower() == JSON_TYPE:
        document = json.loads(body)
        for entry in document.get("files", []):
            if isinstance(entry, dict) and isinstance(entry.get("filename"), str) and isinstance(entry.get("url"), str):
                hashes = entry.get("hashes")
                sha256 = str(hashes.get("sha256", "")) if isinstance(hashes, dict) else ""
                files.append(SdistFile(entry["filename"], urljoin(page_url, entry["url"]), sha256.lower()))
        return files
    links = _Links()
    links.feed(body.decode("utf-8", "replace"))
    for href in links.hrefs:
        url = urljoin(page_url, href)
        parts = urlsplit(url)
        hashes = dict(item.split("=", 1) for item in str(parts.fragment).split("&") if "=" in item)
        filename = unquote(posixpath.basename(str(parts.path)))
        files.append(SdistFile(filename, urlunsplit(parts._replace(fragment="")), hashes.get("sha256", "").lower()))
    return files


def _read_capped(response: Readable, limit: int, sink, what: str) -> int:
    """Copy `response` into `sink(chunk)` until it ends; SdistRejected past `limit` bytes."""
    total = 0
    while chunk := response.read(CHUNK):
        total += len(chunk)
        if total > limit:
            raise SdistError("SdistRejected", f"{what} is larger than {limit:,} bytes; it is not fetched")
        sink(chunk)
    return total


class SdistCache:
    """Fetches, verifies and unpacks sdists under `root` (see the module docstring). `opener` makes every
    network request (tests count them through it)."""

    def __init__(
        self,
        root: str,
        opener: Opener = open_url,
        index: list[str] | None = None,
        max_archive_bytes: int = MAX_ARCHIVE_BYTES,
        max_unpacked_bytes: int = MAX_UNPACKED_BYTES,
        max_members: int = MAX_MEMBERS,
    ):
        self.root = os.path.abspath(root)
        self.opener = opener
        self.index = index
        self.limits = Limits(max_unpacked_bytes, max_members)
        self.max_archive_bytes = max_archive_bytes
        for sub in ("trees", "pins", "locks", "tmp"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)

    def checkout(self, pin: str) -> Checkout:
        """The unpacked tree of the sdist `name==version` (fetched once); raises SdistError."""
        start = time.monotonic()
        try:
            name, version = parse_pin(pin)
        except ValueError as error:
            raise SdistError("SdistNotFound", str(error)) from error
        key = f"{normalize(name)}-{re.sub(r'[^A-Za-z0-9.+_-]', '_', version.lower())}"
        with file_lock(os.path.join(self.root, "locks", key + ".lock")):
            pin_path = os.path.join(self.root, "pins", key + ".json")
            found = self._read_pin(pin_path)
            if found is None:
                found = self._find(name, version)
            tree = os.path.join(self.root, "trees", found.sha256)
            if not os.path.isdir(tree):
                self._fetch(found, tree)
            if not os.path.exists(pin_path):
                temporary = f"{pin_path}.tmp-{os.getpid()}"
                with open(temporary, "w") as handle:
                    json.dump({"filename": found.filename, "url": found.url, "sha256": found.sha256}, handle)
                os.replace(temporary, pin_path)
        return Checkout(redact(found.url), pin, identity(found.sha256), tree, time.monotonic() - start)

    @staticmethod
    def _read_pin(path: str) -> SdistFile | None:
        try:
            with open(path) as handle:
                data = json.load(handle)
            found = SdistFile(data["filename"], data["url"], data["sha256"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return found if re.fullmatch(r"[0-9a-f]{64}", found.sha256) else None

    def _find(self, name: str, version: str) -> SdistFile:
        """The index's sdist file of name==version: the first index holding it, in pip's order."""
        seen = []
        for base in self.index if self.index is not None else index_urls():
            page_url = f"{base.rstrip('/')}/{normalize(name)}/"
            try:
                with self.opener(page_url, ACCEPT) as response:
                    chunks: list[bytes] = []
                    _read_capped(response, MAX_PAGE_BYTES, chunks.append, f"the index page {redact(page_url)}")
                    files = page_files(b"".join(chunks), response.headers.get("Content-Type", ""), response.geturl())
            except urllib.error.HTTPError as error:
                if error.code == 404:
                    seen.append(f"{redact(base)} has no project {name!r}")
                    continue
                raise SdistError(
                    "SdistUnreachable", f"the index page {redact(page_url)} answered HTTP {error.code}; try again later"
                ) from error
            except (urllib.error.URLError, OSError, ValueError) as error:
                raise SdistError(
                    "SdistUnreachable",
                    f"cannot read the index page {redact(page_url)}: {getattr(error, 'reason', error)}; check the "
                    f"host's network, proxy (HTTPS_PROXY) and CA bundle (PIP_CERT)",
                ) from error
            found = pick_sdist(files, name, version)
            if found is None:
                sdists = [file.filename for file in files if file.filename.lower().endswith(EXTENSIONS)]
                listed = f" (its last sdists: {', '.join(sdists[-5:])})" if sdists else " (it lists no sdists)"
                seen.append(f"{redact(base)} has no sdist of {name} {version}{listed}")
                continue
            if not re.fullmatch(r"[0-9a-f]{64}", found.sha256):
                raise SdistError(
                    "SdistRejected",
                    f"the index gives no sha256 for {found.filename}, so it cannot be verified; use an index that "
                    f"does (PEP 503 `#sha256=` fragments or PEP 691 hashes)",
                )
            return found
        raise SdistError(
            "SdistNotFound",
            f"no sdist for {name}=={version}: {'; '.join(seen)}; pin a version that has a source distribution "
            f"(the package index's release files list it as .tar.gz or .zip)",
        )

    def _fetch(self, found: SdistFile, tree: str) -> None:
        """Download `found`, verify its hash and unpack it into `tree` (renamed into place at the end)."""
        work = tempfile.mkdtemp(prefix="fetch-", dir=os.path.join(self.root, "tmp"))
        try:
            archive = os.path.join(work, "archive")
            digest = hashlib.sha256()
            try:
                with self.opener(found.url, "*/*") as response, open(archive, "wb") as handle:

                    def sink(chunk: bytes) -> None:
                        digest.update(chunk)
                        handle.write(chunk)

                    _read_capped(response, self.max_archive_bytes, sink, found.filename)
            except (urllib.error.URLError, OSError) as error:
                raise SdistError(
                    "SdistUnreachable", f"cannot download {redact(found.url)}: {getattr(error, 'reason', error)}"
                ) from error
            if digest.hexdigest() != found.sha256:
                raise SdistError(
                    "SdistRejected",
                    f"{found.filename}: sha256 {digest.hexdigest()} is not the index's {found.sha256}; the download "
                    f"was altered or truncated (a proxy or mirror?)",
                )
            unpacked = os.path.join(work, "tree")
            unpack(archive, found.filename, unpacked, self.limits)
            try:
                os.rename(unpacked, tree)
            except OSError:
                if not os.path.isdir(tree):
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)


# -- the safe unpacker ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limits:
    max_unpacked_bytes: int = MAX_UNPACKED_BYTES
    max_members: int = MAX_MEMBERS


def _rejected(filename: str, problem: str) -> SdistError:
    return SdistError("SdistRejected", f"{filename}: {problem}; the archive is not unpacked")


def _relative(filename: str, name: str) -> tuple[str, ...]:
    """The member name's parts, or SdistRejected for an absolute name or one with `..`."""
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name) or "\\" in name or "\0" in name:
        raise _rejected(filename, f"member {name!r} has an absolute or non-POSIX path")
    parts = tuple(part for part in name.split("/") if part not in ("", "."))
    if ".." in parts:
        raise _rejected(filename, f"member {name!r} reaches outside the archive's directory ('..')")
    if not parts:
        raise _rejected(filename, f"member {name!r} names no file")
    return parts


def _check_tree(filename: str, names: list[tuple[str, ...]], dirs: set[tuple[str, ...]]) -> str:
    """The one top-level directory every member is under; SdistRejected when there is not exactly one."""
    tops = {parts[0] for parts in names}
    if len(tops) != 1 or not any(len(parts) > 1 for parts in names):
        raise _rejected(filename, f"an sdist holds one top-level directory, this one has {sorted(tops)[:5]}")
    (top,) = tops
    if any(parts == (top,) for parts in names) and (top,) not in dirs:
        raise _rejected(filename, f"its top-level {top!r} is a file, not a directory")
    return top


def _link_inside(filename: str, member: tarfile.TarInfo, parts: tuple[str, ...]) -> None:
    """SdistRejected unless the link's target, read as written, stays inside the top-level directory (chains
    of links are checked once they exist: `_links_stay_inside`)."""
    target = member.linkname
    if target.startswith("/") or not target:
        raise _rejected(filename, f"link {member.name!r} points to the absolute path {target!r}")
    base = parts[:-1] if member.issym() else ()
    resolved = posixpath.normpath(posixpath.join("/".join(base) or ".", target))
    if resolved == ".." or resolved.startswith("../") or resolved.split("/")[0] != parts[0]:
        raise _rejected(filename, f"link {member.name!r} points outside the package's directory ({target!r})")


def _links_stay_inside(filename: str, tree: str) -> None:
    """SdistRejected when a symlink of the unpacked `tree`, followed through any other, leads outside it."""
    root = os.path.realpath(tree)
    for parent, dirnames, filenames in os.walk(tree):
        for name in dirnames + filenames:
            path = os.path.join(parent, name)
            if os.path.islink(path):
                real = os.path.realpath(path)
                if real != root and not real.startswith(root + os.sep):
                    link = os.path.relpath(path, tree)
                    raise _rejected(filename, f"link {link!r} leads outside the package's directory")


def unpack(archive: str, filename: str, dest: str, limits: Limits = Limits()) -> None:
    """Unpack the sdist `archive` (named `filename`) into `dest` (which must not exist), its single
    top-level directory stripped; SdistRejected for anything unsafe or over `limits` (module docstring)."""
    work = dest + ".unpack"
    os.makedirs(work)
    try:
        if filename.lower().endswith(".zip"):
            top = _unpack_zip(archive, filename, work, limits)
        elif filename.lower().endswith(".tar.gz"):
            top = _unpack_tar(archive, filename, work, limits)
        else:
            raise _rejected(filename, "not a .tar.gz or .zip archive")
        _readable(os.path.join(work, top))
        os.rename(os.path.join(work, top), dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _unpack_tar(archive: str, filename: str, work: str, limits: Limits) -> str:
    plain = os.path.join(work, ".archive.tar")
    cap = limits.max_unpacked_bytes + TAR_OVERHEAD * limits.max_members
    try:
        with gzip.open(archive, "rb") as source, open(plain, "wb") as handle:
            _read_capped(source, cap, handle.write, f"{filename} inflated")
    except SdistError as error:
        raise _rejected(filename, f"it inflates to more than {cap:,} bytes") from error
    except (OSError, EOFError, zlib.error) as error:
        raise _rejected(filename, f"not a readable gzip stream ({error})") from error
    try:
        with tarfile.open(plain, "r:") as tar:
            members, names, dirs, links, total = [], [], set(), set(), 0
            for member in tar:
                members.append(member)
                if len(members) > limits.max_members:
                    raise _rejected(filename, f"it has more than {limits.max_members:,} members")
                parts = _relative(filename, member.name)
                if any(parts[:end] in links for end in range(1, len(parts))):
                    raise _rejected(filename, f"member {member.name!r} is written through a link")
                if member.issym():
                    links.add(parts)
                if member.isdir():
                    dirs.add(parts)
                elif member.issym() or member.islnk():
                    _link_inside(filename, member, parts)
                elif not member.isreg():
                    raise _rejected(filename, f"member {member.name!r} is a device, FIFO or other special file")
                total += member.size if member.isreg() else 0
                if total > limits.max_unpacked_bytes:
                    raise _rejected(filename, f"its files hold more than {limits.max_unpacked_bytes:,} bytes")
                names.append(parts)
            top = _check_tree(filename, names, dirs)
            tar.extractall(os.path.join(work, "out"), members=members, filter="data")
    except tarfile.FilterError as error:
        raise _rejected(filename, f"tarfile's data filter refused it ({error})") from error
    except (tarfile.TarError, EOFError, OSError) as error:
        raise _rejected(filename, f"not a readable tar archive ({error})") from error
    finally:
        if os.path.exists(plain):
            os.unlink(plain)
    _links_stay_inside(filename, os.path.join(work, "out", top))
    os.rename(os.path.join(work, "out", top), os.path.join(work, top))
    return top


def _unpack_zip(archive: str, filename: str, work: str, limits: Limits) -> str:
    out = os.path.join(work, "out")
    try:
        with zipfile.ZipFile(archive) as bundle:
            infos = bundle.infolist()
            if len(infos) > limits.max_members:
                raise _rejected(filename, f"it has more than {limits.max_members:,} members")
            names, dirs = [], set()
            for info in infos:
                parts = _relative(filename, info.filename)
                mode = info.external_attr >> 16
                if info.is_dir():
                    dirs.add(parts)
                elif stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # many zips give permission bits alone
                    raise _rejected(filename, f"member {info.filename!r} is a link or special file")
                names.append(parts)
            if sum(info.file_size for info in infos) > limits.max_unpacked_bytes:
                raise _rejected(filename, f"its files hold more than {limits.max_unpacked_bytes:,} bytes")
            top = _check_tree(filename, names, dirs)
            left = limits.max_unpacked_bytes
            for info, parts in zip(infos, names, strict=True):
                path = os.path.join(out, *parts)
                os.makedirs(path if info.is_dir() else os.path.dirname(path), exist_ok=True)
                if not info.is_dir():
                    with bundle.open(info) as source, open(path, "wb") as handle:
                        left -= _read_capped(source, left, handle.write, f"{filename}: {info.filename!r}")
    except (zipfile.BadZipFile, zlib.error, RuntimeError, NotImplementedError, EOFError, OSError) as error:
        raise _rejected(filename, f"not a readable zip archive ({error})") from error
    os.rename(os.path.join(out, top), os.path.join(work, top))
    return top


def _readable(tree: str) -> None:
    """Files and directories readable by whichever uid a sandbox runs as (tar modes may say otherwise)."""
    for parent, _, filenames in os.walk(tree):
        os.chmod(parent, os.stat(parent).st_mode | 0o755)
        for name in filenames:
            path = os.path.join(parent, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                os.chmod(path, mode | 0o644)
