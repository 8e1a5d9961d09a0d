"""A local cache of git repositories: one bare mirror per URL, one worktree per commit (GitPython).

Layout under the cache root:
    mirrors/{key}.git            `git clone --mirror` of the URL, fetched again when a ref must be resolved
    worktrees/{key}/{sha}/       a detached worktree of that commit (plus `{sha}.done` once complete)
    locks/{key}.lock             flock held while a mirror or its worktrees change
`key` is a readable slug of the URL plus a hash of it. Processes on one machine share the cache
safely (the lock); a worktree is only used once its `.done` marker exists, so a crash mid-checkout
never leaves a half-written tree in use. A ref that is a full commit SHA already in the mirror needs no
network; any other ref is fetched first, so a moved branch resolves to its new commit.
"""

import fcntl
import hashlib
import os
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass

# GitPython refuses to import without a `git` executable; jobs that clone nothing (functions, Go) must not need
# one, and the repos job checks for it before it starts (pipeline/kinds/repos.py).
os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")

from git import Git, GitCommandError, Repo  # noqa: E402
from git.exc import UnsafeProtocolError  # noqa: E402

GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "SSH_ASKPASS": "true", "GIT_LFS_SKIP_SMUDGE": "1"}
FULL_SHA = re.compile(r"[0-9a-f]{40}")


class GitCacheError(Exception):
    """A clone, fetch, ref resolution or checkout failed; `kind` names which (for the failures table)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Checkout:
    url: str
    ref: str
    commit: str
    path: str
    seconds: float


@contextmanager
def file_lock(path: str):
    """An exclusive flock on `path` (created if need be) for the duration of the block: one process of the
    machine at a time."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cache_key(url: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git"))[:40]
    return f"{slug.strip('-') or 'repo'}-{hashlib.sha256(url.encode()).hexdigest()[:12]}"


def _git_message(error: Exception) -> str:
    if isinstance(error, GitCommandError):
        text = error.stderr if isinstance(error.stderr, str) else str(error)
        lines = [line.strip() for line in text.replace("stderr:", "").splitlines() if line.strip(" '\n")]
        return " | ".join(line.strip("'") for line in lines[-3:]) or f"git exited with {error.status}"
    return str(error)


class GitCache:
    """Clones and checks out repositories under `root` (see the module docstring)."""

    def __init__(self, root: str, timeout_s: float = 600.0):
        self.root = os.path.abspath(root)
        self.timeout_s = timeout_s
        for sub in ("mirrors", "worktrees", "locks"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)

    def checkout(self, url: str, ref: str) -> Checkout:
        """The worktree of `ref` of `url` (cloning or fetching as needed); raises GitCacheError."""
        start = time.monotonic()
        key = cache_key(url)
        with self._lock(key):
            mirror = os.path.join(self.root, "mirrors", key + ".git")
            fresh = not os.path.isdir(mirror)
            if fresh:
                self._clone(url, mirror)
            repo = Repo(mirror)
            repo.git.update_environment(**GIT_ENV)
            commit = self._resolve(repo, ref) if FULL_SHA.fullmatch(ref) and not fresh else None
            if commit is None:
                if not fresh:
                    self._fetch(repo, url)
                commit = self._resolve(repo, ref)
            if commit is None:
                raise GitCacheError(
                    "RefNotFound",
                    f"ref {ref!r} not found in {url}{self._known_refs(repo)}; "
                    f"set `ref` to an existing branch, tag or commit",
                )
            path = self._worktree(repo, key, commit)
        return Checkout(url, ref, commit, path, time.monotonic() - start)

    # -- steps ---------------------------------------------------------------------------------------
    def _lock(self, key: str):
        return file_lock(os.path.join(self.root, "locks", key + ".lock"))

    def _clone(self, url: str, mirror: str) -> None:
        temporary = f"{mirror}.tmp-{os.getpid()}"
        shutil.rmtree(temporary, ignore_errors=True)
        try:
            Git.check_unsafe_protocols(url)
            Git().clone("--mirror", "--quiet", "--", url, temporary, env=GIT_ENV, kill_after_timeout=self.timeout_s)
        except (GitCommandError, UnsafeProtocolError, OSError) as error:
            shutil.rmtree(temporary, ignore_errors=True)
            raise GitCacheError(
                "CloneFailed",
                f"cannot clone {url}: {_git_message(error)}; check the url and that the repository is reachable",
            ) from error
        os.rename(temporary, mirror)

    def _fetch(self, repo: Repo, url: str) -> None:
        try:
            repo.git.fetch("--prune", "--quiet", "origin", kill_after_timeout=self.timeout_s)
        except (GitCommandError, OSError) as error:
            raise GitCacheError(
                "FetchFailed",
                f"cannot fetch {url}: {_git_message(error)}; check that the repository is still reachable",
            ) from error

    @staticmethod
    def _resolve(repo: Repo, ref: str) -> str | None:
        try:
            sha = repo.git.rev_parse("--verify", "--quiet", "--end-of-options", ref + "^{commit}")
        except GitCommandError:
            return None
        return sha.strip() if FULL_SHA.fullmatch(sha.strip()) else None

    @staticmethod
    def _known_refs(repo: Repo) -> str:
        try:
            names = repo.git.for_each_ref("--format=%(refname:short)", "--count=10", "refs/heads", "refs/tags").split()
        except GitCommandError:
            return ""
        return f" (it has: {', '.join(names)})" if names else " (it has no branches or tags)"

    def _worktree(self, repo: Repo, key: str, commit: str) -> str:
        parent = os.path.join(self.root, "worktrees", key)
        path = os.path.join(parent, commit)
        done = path + ".done"
        if os.path.exists(done) and os.path.isdir(path):
            return path
        os.makedirs(parent, exist_ok=True)
        if os.path.lexists(path):
            shutil.rmtree(path, ignore_errors=True)
        try:
            repo.git.worktree("prune")
            repo.git.execute(
                [
                    "git",
                    "-c",
                    "core.hooksPath=/dev/null",
                    "worktree",
                    "add",
                    "--detach",
                    "--force",
                    "--quiet",
                    path,
                    commit,
                ],
                kill_after_timeout=self.timeout_s,
            )
        except (GitCommandError, OSError) as error:
            shutil.rmtree(path, ignore_errors=True)
            raise GitCacheError("CheckoutFailed", f"cannot check out {commit[:12]}: {_git_message(error)}") from error
        with open(done, "w") as handle:
            handle.write(commit + "\n")
        return path
