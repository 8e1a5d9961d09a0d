#!/usr/bin/env bash
# Build the sandbox's base image from Debian packages, for machines that cannot pull from a registry.
#
#   docker/build-base.sh [IMAGE] [SUITE] [MIRROR]      (defaults: tracegen-base:bookworm bookworm deb.debian.org)
#
# debootstrap (minbase) installs Python with venv, pip and pytest, git and CA certificates into a scratch
# directory, and `docker import` turns that tree into IMAGE. Nothing is done when IMAGE already exists,
# so this is cheap to call on every CI run. Needs root (debootstrap), debootstrap and a running Docker engine.
# The Dockerfile then builds the sandbox image on top: docker build --build-arg BASE_IMAGE=IMAGE ...
set -euo pipefail

image="${1:-tracegen-base:bookworm}"
suite="${2:-bookworm}"
mirror="${3:-http://deb.debian.org/debian}"
packages="python3,python3-venv,python3-pip,python3-pytest,git,ca-certificates"

if docker image inspect "$image" >/dev/null 2>&1; then
  echo "build-base: $image exists, nothing to do"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "build-base: debootstrap needs root to build $image" >&2
  exit 1
fi
command -v debootstrap >/dev/null || { echo "build-base: install debootstrap (apt-get install debootstrap)" >&2; exit 1; }

# Several workers may ask for the base at once: one builds, the others wait and then find it.
exec 9>"${TMPDIR:-/tmp}/tracegen-build-base.lock"
flock 9
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "build-base: $image exists, nothing to do"
  exit 0
fi

root="$(mktemp -d "${TMPDIR:-/tmp}/tracegen-base.XXXXXX")"
trap 'rm -rf "$root"' EXIT
start=$SECONDS
echo "build-base: debootstrap $suite ($packages) into $root"
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 \
  || { tail -20 "$root.log" >&2; rm -f "$root.log"; echo "build-base: debootstrap failed" >&2; exit 1; }
rm -f "$root.log"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/tmp/*
echo "build-base: debootstrap took $((SECONDS - start))s"

start=$SECONDS
tar --numeric-owner -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  --message "tracegen base: debootstrap --variant=minbase $suite ($packages)" \
  - "$image" >/dev/null
echo "build-base: docker import took $((SECONDS - start))s; $image is ready"
