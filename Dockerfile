# The sandbox image: where the `docker` backend (pipeline/sandbox/docker.py) runs untrusted code.
#
# It holds a Python >= 3.11 at /usr/bin/python3 with venv, pip and pytest, git, and a copy of tracers/ at
# /opt/tracegen/tracers (the backend also binds the host's tracers/ at its own path, like every backend).
# The backend builds and tags it itself (pipeline/sandbox/image.py); by hand:
#
#   docker build -t tracegen-sandbox .                                            # a machine that can pull
#   docker/build-base.sh && docker build --build-arg BASE_IMAGE=tracegen-base:bookworm -t tracegen-sandbox .
#
# BASE_IMAGE  any Debian-based image with python3; the default is pulled from Docker Hub. Offline machines
#             build tracegen-base:bookworm from Debian packages first (docker/build-base.sh).
# GO_IMAGE    an image with a Go toolchain at /usr/local/go (e.g. golang:1.26-bookworm) to carry Go inside the
#             image, as a cluster needs. The default carries none: the backend then bind-mounts the host's
#             /usr/local/go read-only at the same path when the host has one.
ARG BASE_IMAGE=python:3.11-slim-bookworm
ARG GO_IMAGE=${BASE_IMAGE}

FROM ${GO_IMAGE} AS go
# An empty directory when GO_IMAGE carries no Go, so the copy below always has a source.
RUN mkdir -p /usr/local/go

FROM ${BASE_IMAGE}
ARG BASE_IMAGE
ARG GO_IMAGE

# The same interpreter path whatever the base (python:*-slim images keep theirs in /usr/local/bin); pytest and git
# are installed only when the base lacks them (the debootstrap base has both, and no network to fetch them).
# No file keeps a setuid/setgid bit: the backend already sets no-new-privileges, this is the second lock.
# /root may be traversed (not listed), so host paths under it (e.g. ~/.cache/tracegen) can be bound at their own
# path; the root file system stays read-only all the same.
RUN set -eu; \
    if [ ! -x /usr/bin/python3 ]; then ln -s "$(command -v python3)" /usr/bin/python3; fi; \
    if ! command -v git >/dev/null; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends git ca-certificates; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    if ! /usr/bin/python3 -c 'import pytest' 2>/dev/null; then \
        /usr/bin/python3 -m pip install --no-cache-dir pytest; \
    fi; \
    /usr/bin/python3 -c 'import sys, venv, ensurepip; assert sys.version_info >= (3, 11), sys.version'; \
    find / -xdev -type f -perm /6000 -exec chmod ug-s {} +; \
    chmod 0711 /root

COPY --from=go /usr/local/go /usr/local/go
COPY tracers /opt/tracegen/tracers

ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8
LABEL org.tracegen.role="sandbox" \
      org.tracegen.base-image="${BASE_IMAGE}" \
      org.tracegen.go-image="${GO_IMAGE}"
# Never root by default; the backend picks a per-worker uid for each container.
USER 65534:65534
WORKDIR /tmp
