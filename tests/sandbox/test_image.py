"""The sandbox image's identity and build context (no engine needed), and the message when no engine answers."""

import io
import shutil
import tarfile

import pytest

from pipeline.sandbox import image, make_sandbox


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of the files the build reads, which the test may edit."""
    shutil.copy(image.DOCKERFILE, tmp_path / "Dockerfile")
    shutil.copytree(image.TRACERS, tmp_path / "tracers", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "tracers" / "__pycache__").mkdir()
    (tmp_path / "tracers" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    monkeypatch.setattr(image, "ROOT", tmp_path)
    monkeypatch.setattr(image, "DOCKERFILE", tmp_path / "Dockerfile")
    monkeypatch.setattr(image, "TRACERS", tmp_path / "tracers")
    return tmp_path


def test_tag_is_stable_and_follows_every_input(tree):
    first = image.image_tag()
    assert first == image.image_tag() and first.startswith("tracegen-sandbox:")
    tracer = tree / "tracers" / "trace" / "tracer.py"
    tracer.write_text(tracer.read_text() + "\n# edited\n")
    second = image.image_tag()
    (tree / "Dockerfile").write_text((tree / "Dockerfile").read_text() + "\n# edited\n")
    third = image.image_tag()
    assert (
        len(
            {
                first,
                second,
                third,
                image.image_tag(go_image="golang:1.26-bookworm"),
                image.image_tag(base_image="python:3.12-slim-bookworm"),
            }
        )
        == 5
    )


def test_context_holds_the_dockerfile_and_tracers_only(tree):
    with tarfile.open(fileobj=io.BytesIO(image.build_context())) as tar:
        names = tar.getnames()
        tracer = (tree / "tracers" / "trace" / "tracer.py").read_bytes()
        assert tar.extractfile("tracers/trace/tracer.py").read() == tracer
    assert names[0] == "Dockerfile" and "tracers/trace/tracer.py" in names
    assert all(name == "Dockerfile" or name.startswith("tracers/") for name in names)
    assert not any("__pycache__" in name for name in names)
    assert image.build_context() == image.build_context()  # same tree, same bytes


def test_go_image_is_a_build_arg_only_when_given():
    assert image.build_args("b", None) == {"BASE_IMAGE": "b"}
    assert image.build_args("b", "g") == {"BASE_IMAGE": "b", "GO_IMAGE": "g"}


def test_no_engine_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    with pytest.raises(RuntimeError, match="start dockerd .*or choose --sandbox bwrap"):
        make_sandbox("docker")
