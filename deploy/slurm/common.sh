# Shared by prolog.sh, task-prolog.sh and epilog.sh: the configuration and
# where a job's state lives. Sourced, never run.
IOREPRO_CONF=${IOREPRO_CONF:-/etc/iorepro/slurm.env}
# shellcheck source=/dev/null
[ -r "$IOREPRO_CONF" ] && . "$IOREPRO_CONF"
IOREPRO_COLLECT=${IOREPRO_COLLECT:-iorepro-collect}
IOREPRO_STATE_DIR=${IOREPRO_STATE_DIR:-/run/iorepro}
IOREPRO_STOP_TIMEOUT=${IOREPRO_STOP_TIMEOUT:-60}
job_state="$IOREPRO_STATE_DIR/job_${SLURM_JOB_ID:?not run by Slurm}"

# The cgroup v2 mount: /sys/fs/cgroup on a unified host, a sub-mount (often
# /sys/fs/cgroup/unified) on a hybrid one.
cgroup2_mount() {
    awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts
}

log() {
    echo "iorepro: job $SLURM_JOB_ID: $*" >&2
    logger -t iorepro "job $SLURM_JOB_ID: $*" 2>/dev/null || true
}
