#!/usr/bin/env bash
# Make sure a Docker engine answers: start dockerd in the background when `docker info` does not, and wait
# for it (up to ${TRACEGEN_DOCKERD_WAIT:-60} seconds). Exits non-zero with the end of dockerd's log if it
# cannot. For machines without an init system (CI containers, sandboxes); needs root.
set -euo pipefail

if docker info >/dev/null 2>&1; then
  exit 0
fi
command -v dockerd >/dev/null || { echo "start-engine: dockerd is not installed (apt-get install docker.io)" >&2; exit 1; }
if [ "$(id -u)" -ne 0 ]; then
  echo "start-engine: no Docker engine answers and only root can start dockerd" >&2
  exit 1
fi

log="${TRACEGEN_DOCKERD_LOG:-/var/log/tracegen-dockerd.log}"
echo "start-engine: starting dockerd (log: $log)"
nohup dockerd >"$log" 2>&1 </dev/null &
pid=$!
wait_s="${TRACEGEN_DOCKERD_WAIT:-60}"
for _ in $(seq "$wait_s"); do
  if docker info >/dev/null 2>&1; then
    echo "start-engine: dockerd (pid $pid) answers"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    break
  fi
  sleep 1
done
echo "start-engine: dockerd did not answer within ${wait_s}s; the end of its log:" >&2
tail -20 "$log" >&2 || true
exit 1
