"""Package-index sdists as repositories: a real download from the index, cached by hash; a local simple index
for what PyPI cannot be made to do (a wrong hash, a legacy zip); hostile archives the unpacker refuses; the
manifest's `sdist` key; the refresh's immutable pins; and one sdist traced end to end."""

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipeline.kinds.repos import ReposConfig
from pipeline.refresh.plan import repo_units
from pipeline.refresh.sources import read_sources
from pipeline.sources.repo_manifest import RepoSpec, read_repo_manifest
from pipeline.sources.sdist import SdistError
from pipeline.sources.sdist.archive import Limits, unpack
from pipeline.sources.sdist.cache import SdistCache
from pipeline.sources.sdist.index import open_url, parse_pin

INICONFIG_SHA256 = "2d91e135bf72d31a410b17c16da610a82cb55f6b0477d1a902134b24a455b8b3"  # PyPI files never change
PIP_CACHE = os.path.join(tempfile.gettempdir(), "tracegen-test-pip-cache")


class Counting:
    """The real opener, with every request it makes written down."""

    def __init__(self, accept: str | None = None):
        self.urls: list[str] = []
        self.accept = accept

    def __call__(self, url: str, accept: str):
        self.urls.append(url)
        return open_url(url, self.accept or accept)


# -- the real index ------------------------------------------------------------------------------------------
def test_a_real_sdist_is_downloaded_verified_unpacked_and_then_served_from_the_cache(tmp_path):
    counting = Counting()
    checkout = SdistCache(str(tmp_path), opener=counting).checkout("iniconfig==2.0.0")
    assert counting.urls[0] == "https://pypi.org/simple/iniconfig/" and len(counting.urls) == 2
    assert counting.urls[1].startswith("https://files.pythonhosted.org/") and checkout.url == counting.urls[1]
    assert checkout.commit == f"sdist-sha256-{INICONFIG_SHA256}" and checkout.ref == "iniconfig==2.0.0"
    assert checkout.path == str(tmp_path / "trees" / INICONFIG_SHA256)
    assert os.path.isfile(os.path.join(checkout.path, "src", "iniconfig", "__init__.py"))  # top directory stripped
    assert "iniconfig-2.0.0" not in os.listdir(checkout.path)

    again = Counting()
    second = SdistCache(str(tmp_path), opener=again).checkout("IniConfig == 2.0.0")  # another worker, same pin
    assert again.urls == [] and second.path == checkout.path and second.commit == checkout.commit
    assert os.listdir(tmp_path / "tmp") == []


def test_the_html_page_is_read_where_the_index_gives_no_json(tmp_path):
    html_only = Counting(accept="text/html")
    checkout = SdistCache(str(tmp_path), opener=html_only).checkout("iniconfig==2.0.0")
    assert checkout.commit == f"sdist-sha256-{INICONFIG_SHA256}" and len(html_only.urls) == 2


def test_a_missing_version_or_project_is_SdistNotFound_naming_the_fix(tmp_path):
    cache = SdistCache(str(tmp_path))
    with pytest.raises(SdistError, match=r"no sdist for iniconfig==9\.9\.9: .* has no sdist of iniconfig 9\.9\.9 "):
        cache.checkout("iniconfig==9.9.9")
    with pytest.raises(SdistError, match=r"has no project 'tracegen-no-such-project-x7'; pin a version") as caught:
        cache.checkout("tracegen-no-such-project-x7==1.0")
    assert caught.value.kind == "SdistNotFound"


# -- a local simple index ------------------------------------------------------------------------------------
@pytest.fixture
def local_index(tmp_path):
    """A PEP 503 index served over HTTP from `tmp_path/site`: (base URL, site directory)."""
    site = tmp_path / "site"
    (site / "files").mkdir(parents=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple", site
    server.shutdown()
    server.server_close()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


def publish(site, project: str, filename: str, data: bytes, sha256: str | None = None) -> None:
    (site / "files" / filename).write_bytes(data)
    page = site / "simple" / project
    page.mkdir(parents=True, exist_ok=True)
    digest = sha256 or hashlib.sha256(data).hexdigest()
    (page / "index.html").write_text(f'<html><body><a href="../../files/{filename}#sha256={digest}">{filename}</a>')


def targz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def regular(name: str, data: bytes = b"x = 1\n", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


def zipped(files: dict[str, bytes], links: tuple[str, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16) if name in links else 0  # a symlink's mode, else none
            bundle.writestr(info, data, zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def test_a_hash_other_than_the_index_says_is_rejected_and_nothing_is_kept(tmp_path, local_index):
    base, site = local_index
    publish(site, "demo", "demo-1.0.tar.gz", targz([regular("demo-1.0/demo.py")]), sha256="0" * 64)
    cache = SdistCache(str(tmp_path / "cache"), index=[base])
    with pytest.raises(SdistError, match=r"demo-1\.0\.tar\.gz: sha256 [0-9a-f]{64} is not the index's 0{64}") as caught:
        cache.checkout("demo==1.0")
    assert caught.value.kind == "SdistRejected"
    assert os.listdir(tmp_path / "cache" / "trees") == os.listdir(tmp_path / "cache" / "pins") == []


def test_a_legacy_zip_name_is_found_through_a_relative_link_and_unpacked(tmp_path, local_index):
    base, site = local_index
    data = zipped({"Demo.Pkg-2.1b1/": b"", "Demo.Pkg-2.1b1/demo_pkg.py": b"X = 2\n", "Demo.Pkg-2.1b1/t/test_x.py": b""})
    publish(site, "demo-pkg", "Demo.Pkg-2.1b1.zip", data)
    checkout = SdistCache(str(tmp_path / "cache"), index=[base]).checkout("demo_pkg==2.1b1")
    assert checkout.commit == "sdist-sha256-" + hashlib.sha256(data).hexdigest()
    assert checkout.url == f"{base.removesuffix('/simple')}/files/Demo.Pkg-2.1b1.zip"
    assert sorted(os.listdir(checkout.path)) == ["demo_pkg.py", "t"]


# -- hostile archives ----------------------------------------------------------------------------------------
SMALL = Limits(max_unpacked_bytes=1 << 20, max_members=50)
HOSTILE_TARS = {
    "traversal": ([regular("pkg-1/a.py"), regular("pkg-1/../../x")], r"member 'pkg-1/../../x' reaches outside"),
    "absolute": ([regular("pkg-1/a.py"), regular("/etc/evil")], r"member '/etc/evil' has an absolute"),
    "symlink to /etc": ([regular("pkg-1/a.py"), special("pkg-1/etc", tarfile.SYMTYPE, "/etc")], r"absolute path"),
    "symlink out": ([regular("pkg-1/a.py"), special("pkg-1/up", tarfile.SYMTYPE, "../..")], r"points outside"),
    "hardlink out": (
        [regular("pkg-1/a.py"), special("pkg-1/passwd", tarfile.LNKTYPE, "../etc/passwd")],
        r"link 'pkg-1/passwd' points outside",
    ),
    "hardlink absolute": ([regular("pkg-1/a"), special("pkg-1/p", tarfile.LNKTYPE, "/etc/passwd")], r"absolute"),
    "symlink chain out": (
        [special("pkg-1/l1", tarfile.SYMTYPE, "."), special("pkg-1/l2", tarfile.SYMTYPE, "l1/.."), regular("pkg-1/a")],
        r"link 'l2' leads outside",
    ),
    "write through a link": (
        [special("pkg-1/l", tarfile.SYMTYPE, "sub"), regular("pkg-1/l/x.py")],
        r"member 'pkg-1/l/x.py' is written through a link",
    ),
    "device": ([regular("pkg-1/a.py"), special("pkg-1/tty", tarfile.CHRTYPE)], r"device, FIFO or other special"),
    "two top-level directories": ([regular("pkg-1/a.py"), regular("other/b.py")], r"one top-level directory"),
    "too many members": ([regular(f"pkg-1/m{n}.py") for n in range(51)], r"more than 50 members"),
    "a bomb past the cap": ([regular("pkg-1/zeros", bytes(8 << 20))], r"inflates to more than 1,150,976 bytes"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_TARS))
def test_hostile_tar_archives_are_refused(tmp_path, case):
    members, expected = HOSTILE_TARS[case]
    archive = tmp_path / "evil.tar.gz"
    archive.write_bytes(targz(members))
    with pytest.raises(SdistError, match=expected) as caught:
        unpack(str(archive), "evil-1.tar.gz", str(tmp_path / "tree"), SMALL)
    assert caught.value.kind == "SdistRejected" and str(caught.value).startswith("evil-1.tar.gz: ")
    assert sorted(os.listdir(tmp_path)) == ["evil.tar.gz"]  # no tree, no leftovers, nothing beside it


HOSTILE_ZIPS = {
    "traversal": (zipped({"pkg-1/a.py": b"", "pkg-1/../../x": b""}), r"reaches outside"),
    "absolute": (zipped({"pkg-1/a.py": b"", "/tmp/evil": b""}), r"absolute or non-POSIX"),
    "symlink": (zipped({"pkg-1/a.py": b"", "pkg-1/etc": b"/etc"}, links=("pkg-1/etc",)), r"is a link or special"),
    "too many members": (zipped({f"pkg-1/m{n}.py": b"" for n in range(51)}), r"more than 50 members"),
    "a bomb past the cap": (zipped({"pkg-1/zeros": bytes(4 << 20)}), r"its files hold more than 1,048,576 bytes"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_ZIPS))
def test_hostile_zip_archives_are_refused(tmp_path, case):
    data, expected = HOSTILE_ZIPS[case]
    archive = tmp_path / "evil.zip"
    archive.write_bytes(data)
    with pytest.raises(SdistError, match=expected) as caught:
        unpack(str(archive), "evil-1.zip", str(tmp_path / "tree"), SMALL)
    assert caught.value.kind == "SdistRejected"
    assert sorted(os.listdir(tmp_path)) == ["evil.zip"]


def test_a_zip_whose_header_understates_a_member_is_refused(tmp_path):
    """The central directory says 10 bytes; the member holds 4 MiB: reading stops at what was declared."""
    archive = tmp_path / "liar.zip"
    archive.write_bytes(zipped({"pkg-1/zeros": bytes(4 << 20)}).replace((4 << 20).to_bytes(4, "little"), b"\x0a\0\0\0"))
    with pytest.raises(SdistError, match=r"not a readable zip archive") as caught:
        unpack(str(archive), "liar-1.zip", str(tmp_path / "tree"), SMALL)
    assert caught.value.kind == "SdistRejected" and not (tmp_path / "tree").exists()


def test_a_good_archive_keeps_its_inner_links_and_is_readable_by_the_sandbox(tmp_path):
    archive = tmp_path / "good.tar.gz"
    members = [
        regular("pkg-1/pkg/core.py", b"def f():\n    return 1\n", mode=0o600),
        special("pkg-1/pkg/alias.py", tarfile.SYMTYPE, "core.py"),
        special("pkg-1/docs", tarfile.SYMTYPE, "pkg"),
    ]
    archive.write_bytes(targz(members))
    unpack(str(archive), "pkg-1.tar.gz", str(tmp_path / "tree"))
    assert sorted(os.listdir(tmp_path / "tree")) == ["docs", "pkg"]
    assert os.readlink(tmp_path / "tree" / "pkg" / "alias.py") == "core.py"
    assert os.stat(tmp_path / "tree" / "pkg" / "core.py").st_mode & 0o644 == 0o644
    assert sorted(os.listdir(tmp_path)) == ["good.tar.gz", "tree"]


# -- the manifest and the refresh ---------------------------------------------------------------------------
def test_the_manifest_takes_an_sdist_instead_of_url_and_ref(tmp_path):
    path = tmp_path / "repos.toml"
    path.write_text('[[repo]]\nname = "six"\nsdist = "six==1.16.0"\ntimeout_s = 300\n')
    (spec,) = read_repo_manifest(str(path))
    assert spec == RepoSpec(name="six", sdist="six==1.16.0", timeout_s=300.0)
    assert spec.url == spec.ref == "" and spec.pin == "six==1.16.0"
    assert parse_pin(" Six == 1.16.0 ") == ("Six", "1.16.0")


@pytest.mark.parametrize(
    "table, expected",
    [
        ('url = "u"\nref = "m"\nsdist = "six==1.16.0"', r"'url' and 'sdist' cannot both be set.*\(line 3\)"),
        ('ref = "m"\nsdist = "six==1.16.0"', r"'ref' and 'sdist' cannot both be set.*\(line 3\)"),
        ("", r"missing required key 'url' \(or set `sdist = \"name==version\"` instead of url \+ ref\) \(line 1\)"),
        ('sdist = "six>=1.16"', r"sdist 'six>=1\.16' must be `name==version` .*\(line 3\)"),
        ('sdist = "six"', r"sdist 'six' must be `name==version`"),
        ('sdist = "six==1.*"', r"sdist 'six==1\.\*' must be `name==version`"),
        ('sdist = "six[test]==1.0"', r"must be `name==version`"),
        ("sdist = 3", r"sdist must be a str, not int \(line 3\)"),
    ],
)
def test_sdist_manifest_errors_name_the_file_the_repo_and_the_key(tmp_path, table, expected):
    path = tmp_path / "repos.toml"
    path.write_text(f'[[repo]]\nname = "a"\n{table}\n')
    with pytest.raises(ValueError, match=r"repos\.toml: \[\[repo\]\] #1 \(a\): .*" + expected):
        read_repo_manifest(str(path))


def test_a_git_specs_repr_and_so_its_fingerprints_are_as_before_sdists():
    spec = RepoSpec("calc", "/srv/calc", "main", timeout_s=60)
    assert "sdist" not in repr(spec) and repr(spec).startswith("RepoSpec(name='calc', url='/srv/calc', ref='main', ")
    assert "sdist='calc==1.0'" in repr(RepoSpec("calc", sdist="calc==1.0"))


def test_the_refresh_takes_an_sdist_pin_as_immutable(tmp_path):
    sources = tmp_path / "sources.toml"
    sources.write_text('[[repo]]\nname = "six"\nsdist = "six==1.16.0"\n')
    (spec,) = read_sources(str(sources)).repos
    config = ReposConfig()
    (first,) = repo_units([spec], config)
    (again,) = repo_units([spec], config)
    (newer,) = repo_units([RepoSpec("six", sdist="six==1.17.0")], config)
    assert first.key == again.key != newer.key
    assert first.unit_id == "repo-six@six==1.16.0" and first.payload == spec


# -- end to end ----------------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_an_sdist_with_its_tests_is_traced_under_its_hash(tmp_path):
    from pipeline.sandbox import make_sandbox
    from pipeline.sources.git_cache import GitCache
    from pipeline.stages.repos.suite_run import RepoTraceSettings
    from pipeline.stages.repos.trace import trace_repo

    spec = RepoSpec("inflection", sdist="inflection==0.5.1", timeout_s=300)
    sdists = SdistCache(str(tmp_path / "sdist"))
    output = trace_repo(
        spec,
        make_sandbox("bwrap"),
        GitCache(str(tmp_path / "git")),
        RepoTraceSettings(),
        "repo-00000-inflection",
        pip_cache=PIP_CACHE,
        sdists=sdists,
    )
    assert output.rows("failures") == []
    rows = output.rows("traces")
    commit = sdists.checkout("inflection==0.5.1").commit
    assert len(commit) == len("sdist-sha256-") + 64 and rows
    assert {row["commit"] for row in rows} == {commit}
    assert all(row["source_id"].startswith(f"inflection@{commit}:inflection/__init__.py:") for row in rows)
    assert {row["repo_url"] for row in rows} == {sdists.checkout("inflection==0.5.1").url}
    assert {"underscore", "camelize", "pluralize"} <= {row["qualname"] for row in rows}
    assert all(row["test_id"].startswith("test_inflection.py::") for row in rows)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_an_sdist_that_cannot_be_had_is_a_clone_failure_row(tmp_path):
    from pipeline.sandbox import make_sandbox
    from pipeline.sources.git_cache import GitCache
    from pipeline.stages.repos.suite_run import RepoTraceSettings
    from pipeline.stages.repos.trace import trace_repo

    spec = RepoSpec("ini", sdist="iniconfig==9.9.9", input_ref="repos.toml:[[repo]] #1")
    output = trace_repo(spec, make_sandbox("bwrap"), GitCache(str(tmp_path / "git")), RepoTraceSettings(), "u")
    (row,) = output.rows("failures")
    assert (row["stage"], row["error_type"], row["source_id"]) == ("clone", "SdistNotFound", "ini@iniconfig==9.9.9")
    assert row["message"].startswith("repository 'ini': no sdist for iniconfig==9.9.9") and output.rows("traces") == []
    assert os.path.isdir(tmp_path / "git" / "sdist" / "locks")  # the default sdist cache: under the git cache
