"""The git cache: refs resolve to commit SHAs, one mirror per URL, one worktree per commit, clear errors."""

import os

import pytest
from repo_fixtures import commit, git, make_repo

from pipeline.sources.git_cache import GitCache, GitCacheError


@pytest.fixture
def origin(tmp_path):
    path = tmp_path / "origin"
    first = make_repo(path, {"mod.py": "X = 1\n"})
    git(path, "tag", "v1")
    second = commit(path, {"mod.py": "X = 2\n"}, "second")
    return path, first, second


def test_refs_resolve_to_commits_with_their_files(tmp_path, origin):
    path, first, second = origin
    cache = GitCache(str(tmp_path / "cache"))
    for ref, sha, text in (
        ("main", second, "X = 2\n"),
        ("v1", first, "X = 1\n"),
        (first, first, "X = 1\n"),
        (first[:10], first, "X = 1\n"),
        ("HEAD", second, "X = 2\n"),
    ):
        checkout = cache.checkout(str(path), ref)
        assert checkout.commit == sha, ref
        assert open(os.path.join(checkout.path, "mod.py")).read() == text
        assert checkout.path.endswith(sha)
    assert len(os.listdir(tmp_path / "cache" / "mirrors")) == 1  # one mirror per URL


def test_a_moved_branch_is_fetched_and_a_known_sha_needs_no_remote(tmp_path, origin):
    path, first, second = origin
    cache = GitCache(str(tmp_path / "cache"))
    assert cache.checkout(str(path), "main").commit == second
    third = commit(path, {"mod.py": "X = 3\n"}, "third")
    assert cache.checkout(str(path), "main").commit == third
    os.rename(path, tmp_path / "gone")  # the remote disappears: a pinned SHA still checks out from the mirror
    assert cache.checkout(str(path), second).commit == second
    with pytest.raises(GitCacheError) as caught:
        cache.checkout(str(path), "main")
    assert caught.value.kind == "FetchFailed"


def test_file_urls_clone(tmp_path, origin):
    path, _, second = origin
    assert GitCache(str(tmp_path / "cache")).checkout(f"file://{path}", "main").commit == second


def test_a_missing_ref_names_the_refs_there_are(tmp_path, origin):
    path, _, _ = origin
    with pytest.raises(GitCacheError, match=r"ref 'nope' not found in .*origin \(it has: main, v1\)") as caught:
        GitCache(str(tmp_path / "cache")).checkout(str(path), "nope")
    assert caught.value.kind == "RefNotFound"


@pytest.mark.parametrize(
    "url", ["/nonexistent/repository", "https://127.0.0.1:9/nothing.git", "ext::sh -c touch% /tmp/pwned"]
)
def test_unreachable_or_unsafe_urls_fail_to_clone(tmp_path, url):
    with pytest.raises(GitCacheError, match=r"cannot clone") as caught:
        GitCache(str(tmp_path / "cache")).checkout(url, "main")
    assert caught.value.kind == "CloneFailed"
    assert os.listdir(tmp_path / "cache" / "mirrors") == []  # nothing half-cloned is left


def test_a_half_made_worktree_is_made_again(tmp_path, origin):
    path, _, second = origin
    cache = GitCache(str(tmp_path / "cache"))
    checkout = cache.checkout(str(path), "main")
    os.remove(checkout.path + ".done")
    os.remove(os.path.join(checkout.path, "mod.py"))
    again = cache.checkout(str(path), "main")
    assert again.path == checkout.path and os.path.isfile(os.path.join(again.path, "mod.py"))
