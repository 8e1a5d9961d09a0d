#!/usr/bin/env bash
# Make the bundled example repositories real git repositories under DIR, and write DIR/repos.toml.
#   examples/repos/build.sh /tmp/example-repos
#   .venv/bin/tracegen trace-repos --manifest /tmp/example-repos/repos.toml --out out-repos
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="${1:?usage: build.sh DIR}"
mkdir -p "$target"
target="$(cd "$target" && pwd)"
: > "$target/repos.toml"
for source in "$here"/*/; do
  name="$(basename "$source")"
  rm -rf "${target:?}/$name"
  cp -r "$source" "$target/$name"
  git -C "$target/$name" -c init.defaultBranch=main init -q
  git -C "$target/$name" add -A
  git -C "$target/$name" -c user.name=tracegen -c user.email=tracegen@example.org commit -q -m "example: $name"
  printf '[[repo]]\nname = "%s"\nurl = "%s"\nref = "main"\n\n' "$name" "$target/$name" >> "$target/repos.toml"
done
echo "$target/repos.toml"
