"""The package index's simple API: the pin `name==version`, the project's page, and its sdist file of exactly
that version.

The page is asked for as PEP 691 JSON (`application/vnd.pypi.simple.v1+json`), else the PEP 503 HTML page is
read, at the index URLs pip would use (`pipeline.sandbox.index_proxy.index_urls`: `PIP_INDEX_URL`/
`PIP_EXTRA_INDEX_URL`, pip.conf, default PyPI; the first index holding the version wins), through the host's
HTTPS proxy (`HTTPS_PROXY`, urllib's own handling) and with `PIP_CERT` (else `REQUESTS_CA_BUNDLE`, else the
system's) as the CA bundle. The sdist file is the one of exactly that version (the project name normalised, the
version as the file names it: PEP 625 `name-version.tar.gz` or a legacy `.tar.gz`/`.zip` name; `.tar.gz`
first; a yanked file still counts, as for pip with an exact pin).
"""

import html.parser
import json
import os
import posixpath
import re
import ssl
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from typing import Protocol
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from pipeline.sources.sdist import Readable

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
TIMEOUT_S = 60.0
EXTENSIONS = (".tar.gz", ".zip")  # in order of preference

PIN = re.compile(
    r"\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*==\s*(?P<version>[A-Za-z0-9][A-Za-z0-9.+!_-]*)\s*"
)


class Response(Readable, Protocol):
    """What urllib's `urlopen` returns, as far as this module uses it."""

    headers: Message

    def geturl(self) -> str: ...
    def __enter__(self) -> "Response": ...
    def __exit__(self, *exc) -> None: ...


Opener = Callable[[str, str], Response]  # (url, Accept header) -> the response (raises urllib's errors)


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
