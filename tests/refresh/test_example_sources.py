"""examples/sources.toml, the sources a newcomer tries `tracegen refresh` on, reads as it says: the bundled
functions and Go programs, and (uncommented) the bundled repository that examples/repos/build.sh makes."""

from pathlib import Path

from pipeline.refresh.sources import read_sources

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_example_sources_name_the_bundled_functions_and_go_programs():
    sources = read_sources(str(EXAMPLES / "sources.toml"))
    assert sources.functions == (str(EXAMPLES / "functions.jsonl"),)
    assert sources.go == (str(EXAMPLES / "go"),) and sources.repos == ()
    assert all(Path(path).exists() for path in (*sources.functions, *sources.go))


def test_its_commented_repository_reads_once_uncommented(tmp_path):
    text = (EXAMPLES / "sources.toml").read_text()
    block = text[text.index("# [[repo]]") :]
    uncommented = tmp_path / "sources.toml"
    uncommented.write_text(text.replace(block, "\n".join(line[2:] for line in block.splitlines()) + "\n"))
    (repo,) = read_sources(str(uncommented)).repos
    assert (repo.name, repo.url, repo.ref) == ("textkit", "/tmp/example-repos/textkit", "main")
    assert (EXAMPLES / "repos" / repo.name).is_dir()  # what build.sh makes a git repository
