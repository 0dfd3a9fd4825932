#!/bin/bash
# Slurm TaskProlog (slurm.conf: TaskProlog=/etc/slurm/iorepro/task-prolog.sh),
# run as the job's user in each task just before the task's program starts:
# where the prolog made a cgroup for the job, the task joins it (its parent,
# the task itself, moves; what it runs and forks stays inside).
#
# Moving a process between cgroups takes write access to the cgroup.procs of
# their common ancestor: root's jobs always can; other users' only where the
# node delegates it. A task that cannot join runs untraced and says so.
. "$(dirname "$0")/common.sh"
own="$job_state/own_cgroup"
[ -r "$own" ] || exit 0
if ! echo "$PPID" > "$(cat "$own")/cgroup.procs" 2>/dev/null; then
    echo "print iorepro: task $SLURM_PROCID could not join $(cat "$own"): not traced"
fi
exit 0
