#!/bin/bash
# Slurm Epilog (slurm.conf: Epilog=/etc/slurm/iorepro/epilog.sh), run as root
# on every node of a job once its tasks have ended: stops the job's collector
# with SIGTERM (it drains the kernel side, writes the last segment and the
# manifest, then exits), waits for it, and removes the cgroup the prolog made.
set -u
. "$(dirname "$0")/common.sh"
[ -d "$job_state" ] || exit 0
if [ -r "$job_state/pid" ]; then
    pid=$(cat "$job_state/pid")
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 $((IOREPRO_STOP_TIMEOUT * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "iorepro-collect did not stop in ${IOREPRO_STOP_TIMEOUT}s: killed (finished segments stay readable)"
        kill -KILL "$pid"
    fi
fi
[ -r "$job_state/own_cgroup" ] && rmdir "$(cat "$job_state/own_cgroup")" 2>/dev/null
# The status lines and the collector's log are kept beside the trace (not
# in it: a trace directory holds only its own files).
keep="${IOREPRO_TRACE_DIR:-}/job_$SLURM_JOB_ID.$(hostname -s)"
if [ -d "${IOREPRO_TRACE_DIR:-}/job_$SLURM_JOB_ID" ]; then
    cp "$job_state/status.jsonl" "$keep.status.jsonl" 2>/dev/null
    cp "$job_state/collect.log" "$keep.collect.log" 2>/dev/null
fi
rm -rf "$job_state"
exit 0
