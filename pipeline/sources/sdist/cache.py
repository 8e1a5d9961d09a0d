"""The machine's sdist cache: each pin fetched once (its file found on the index, downloaded — at most
MAX_ARCHIVE_BYTES —, its sha256 checked against the index's, unpacked), then served as a checkout without the
network.

Layout under the cache root:
    trees/{sha256}/           the unpacked tree (renamed into place once complete: never half-written)
    pins/{name}-{version}.json  what the index said the pin is (file name, URL, sha256)
    locks/{name}-{version}.lock flock held while a pin is fetched (Ray workers on one machine share the cache)
    tmp/                      downloads and unpacks in progress
A `name==version` is immutable: once its pin and tree are here, a checkout makes no network request.

The checkout's `commit` is `sdist-sha256-{hex}` (the archive's hash: a dash, not a colon, so `source_id`
`name@commit:path:qualname` still splits as for a git commit), its `url` the file's URL, its `path` the tree.
"""

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import urllib.error

from pipeline.sandbox.index_proxy import index_urls
from pipeline.sources.git_cache import Checkout, file_lock
from pipeline.sources.sdist import SdistError, read_capped
from pipeline.sources.sdist.archive import MAX_MEMBERS, MAX_UNPACKED_BYTES, Limits, unpack
from pipeline.sources.sdist.index import (
    ACCEPT,
    EXTENSIONS,
    Opener,
    SdistFile,
    normalize,
    open_url,
    page_files,
    parse_pin,
    pick_sdist,
    redact,
)

MAX_PAGE_BYTES = 64 << 20  # a project page (some list thousands of files)
MAX_ARCHIVE_BYTES = 64 << 20
IDENTITY = "sdist-sha256-"


def identity(sha256: str) -> str:
    return IDENTITY + sha256


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
                    read_capped(response, MAX_PAGE_BYTES, chunks.append, f"the index page {redact(page_url)}")
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

                    read_capped(response, self.max_archive_bytes, sink, found.filename)
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
