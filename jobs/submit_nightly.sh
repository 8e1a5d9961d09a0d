#!/usr/bin/env bash
# Submit tonight's refresh to a Ray cluster once, follow it, and exit with its outcome (docs/scheduling.md).
#
#   jobs/submit_nightly.sh ADDRESS [refresh options...]     e.g. http://head:8265 --sources s.toml --root s3://b/ds
#
# The submission id is nightly-<UTC date> (override: TRACEGEN_NIGHT): a scheduler that retries the same night
# (cron re-run, systemd Persistent=true catching up, a CronJob pod restarted) re-attaches to the job already
# submitted instead of starting a second refresh. Exit: 0 the job succeeded (published or nothing new),
# 1 it failed (failed units, or it was stopped), 2 this script was called wrongly or the cluster is unreachable.
set -uo pipefail

if [[ $# -lt 1 || $1 == -* ]]; then
    echo "usage: jobs/submit_nightly.sh RAY_DASHBOARD_ADDRESS [tracegen refresh options...]" >&2
    exit 2
fi
address=$1
shift
night=${TRACEGEN_NIGHT:-nightly-$(date -u +%F)}
here=$(cd "$(dirname "$0")/.." && pwd)
ray=${RAY:-ray}

submitted=$("$ray" job submit --address "$address" --submission-id "$night" --no-wait --working-dir "$here" \
    -- python jobs/nightly_refresh.py "$@" 2>&1)
if [[ $? -ne 0 ]]; then
    if ! "$ray" job status --address "$address" "$night" >/dev/null 2>&1; then
        echo "tracegen nightly: could not submit $night to $address: ${submitted##*$'\n'}" >&2
        exit 2
    fi
    echo "tracegen nightly: $night was already submitted; following it"
fi
"$ray" job logs --address "$address" --follow "$night"
# `ray job status` writes "Job 'ID' succeeded" (or failed, stopped) between rules, with colours
status=$("$ray" job status --address "$address" "$night" 2>&1 | sed 's/\x1b\[[0-9;]*m//g')
if grep -qiE "'$night' succeeded|: SUCCEEDED" <<<"$status"; then
    echo "tracegen nightly: $night succeeded"
    exit 0
fi
echo "tracegen nightly: $night did not succeed: $(grep -iE "'$night'|status" <<<"$status" | tail -n 1)" >&2
exit 1
