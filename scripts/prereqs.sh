#!/usr/bin/env bash
# What `make run` and `make test` need from the machine, installed or started when it is missing.
#
#   scripts/prereqs.sh run     the main job: Python venv support, bubblewrap, prlimit/setpriv (util-linux)
#   scripts/prereqs.sh test    the suite: the above, plus git, Docker (docker.io, a running dockerd, the
#                              sandbox's base image made by docker/build-base.sh), debootstrap, Go >= 1.26
#
# As root on Debian the missing packages are installed with apt-get and dockerd is started; otherwise
# nothing is changed and one line says exactly what to run. Go is never installed here (Debian's is too old):
# the line names where to get it. Cheap when everything is there, so both make targets call it every time.
set -euo pipefail
cd "$(dirname "$0")/.."

what="${1:-run}"
case "$what" in run|test) ;; *) echo "prereqs: usage: $0 run|test" >&2; exit 2 ;; esac
GO_MIN_MINOR=26
PYTHON="${PYTHON:-python3}"

packages=()
"$PYTHON" -c "import venv, ensurepip" 2>/dev/null || packages+=(python3-venv)
command -v bwrap >/dev/null || packages+=(bubblewrap)
{ command -v prlimit && command -v setpriv; } >/dev/null || packages+=(util-linux)
if [ "$what" = test ]; then
  command -v git >/dev/null || packages+=(git)
  command -v dockerd >/dev/null || packages+=(docker.io)
  command -v debootstrap >/dev/null || packages+=(debootstrap)
fi

if [ ${#packages[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "prereqs: missing ${packages[*]}: run 'sudo apt-get install -y ${packages[*]}' (Debian), then make $what again" >&2
    exit 1
  fi
  echo "prereqs: installing ${packages[*]} (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

# bubblewrap must work, not only be installed (user namespaces may be switched off on this kernel).
if ! err=$(bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid --unshare-net true 2>&1); then
  echo "prereqs: bubblewrap cannot create a sandbox here ($err): run as root, or enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)" >&2
  exit 1
fi

if [ "$what" = test ]; then
  if ! command -v go >/dev/null; then
    echo "prereqs: Go 1.$GO_MIN_MINOR or newer is needed for the Go stage: install it from https://go.dev/dl/ into /usr/local/go and put /usr/local/go/bin on PATH" >&2
    exit 1
  fi
  minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
  if [ "$minor" -lt "$GO_MIN_MINOR" ]; then
    echo "prereqs: $(go env GOVERSION) is too old, Go 1.$GO_MIN_MINOR or newer is needed: install it from https://go.dev/dl/" >&2
    exit 1
  fi
  docker/start-engine.sh
  docker/build-base.sh
fi
