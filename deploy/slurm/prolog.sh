#!/bin/bash
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/iorepro/prolog.sh), run as
# root on every node of a job before its tasks start: starts iorepro-collect
# on the job's cgroup, in the background, and waits until it traces.
#
# The job's cgroup: with Slurm's cgroup/v2 plugin and PrologFlags=Contain the
# job's own (.../job_<id>) already exists and holds every step of the job.
# Without it (proctrack/linuxproc, or cgroup v1 controllers) the prolog makes
# a cgroup v2 directory for the job, and task-prolog.sh moves each task into
# it (tasks then start inside it, with all their children).
#
# A failure here never fails the job: the job runs untraced and the reason
# goes to syslog and slurmd's log.
set -u
. "$(dirname "$0")/common.sh"
[ -n "${IOREPRO_TRACE_DIR:-}" ] || exit 0

mount=$(cgroup2_mount)
[ -n "$mount" ] || { log "no cgroup v2 mount: not traced"; exit 0; }
cgroup=$(find "$mount" -maxdepth 5 -type d -name "job_$SLURM_JOB_ID" \
    -not -path "$mount/iorepro/*" 2>/dev/null | head -n 1)
mkdir -p "$job_state"
if [ -z "$cgroup" ]; then
    cgroup="$mount/iorepro/job_$SLURM_JOB_ID"
    mkdir -p "$cgroup" || { log "cannot make $cgroup: not traced"; exit 0; }
    echo "$cgroup" > "$job_state/own_cgroup"
fi
echo "$cgroup" > "$job_state/cgroup"

out="$IOREPRO_TRACE_DIR/job_$SLURM_JOB_ID/host=$(hostname -s)"
mkdir -p "$(dirname "$out")"
status="$job_state/status.jsonl"
# The first status line is written once the probes are attached: the
# sign that the job's first call will be seen.
# shellcheck disable=SC2086
setsid "$IOREPRO_COLLECT" --out "$out" --cgroup "$cgroup" \
    --status-interval 1s --status-file "$status" $IOREPRO_COLLECT_ARGS \
    </dev/null >"$job_state/collect.log" 2>&1 &
echo $! > "$job_state/pid"
for _ in $(seq 1 300); do
    [ -s "$status" ] && exit 0
    kill -0 "$(cat "$job_state/pid")" 2>/dev/null || break
    sleep 0.1
done
log "iorepro-collect did not start: $(tail -n 3 "$job_state/collect.log")"
exit 0
