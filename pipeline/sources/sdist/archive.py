"""Unpacking an sdist archive safely: every member a regular file, directory or link staying inside the one
top-level directory, which is stripped; no absolute names, no `..`, no devices; at most MAX_MEMBERS members and
MAX_UNPACKED_BYTES bytes (counted while the gzip stream is inflated, so a bomb stops at the cap); tarfile's
`data` filter on top. Anything else is SdistRejected."""

import gzip
import os
import posixpath
import re
import shutil
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass

from pipeline.sources.sdist import SdistError, read_capped

MAX_UNPACKED_BYTES = 512 << 20
MAX_MEMBERS = 20_000
TAR_OVERHEAD = 2048  # bytes of tar headers and padding allowed per member on top of MAX_UNPACKED_BYTES


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
    top-level directory stripped; SdistRejected for anything unsafe or over `limits` (see the module docstring)."""
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
            read_capped(source, cap, handle.write, f"{filename} inflated")
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
                        left -= read_capped(source, left, handle.write, f"{filename}: {info.filename!r}")
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
