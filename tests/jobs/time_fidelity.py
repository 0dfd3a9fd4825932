"""Time at N against the job at N: a job (`--job`: the DLIO-like benchmark
bench_like.py, or the PyTorch DDP job train_ddp.py with DataLoader workers;
each drops a file from the page cache after reading it, as a dataset larger
than memory would) runs at R processes under the collector; the same job
runs at N processes, and the trace is replayed at N ranks with
`--timing original --evict-reads` (buffered reads through the kernel's
read-ahead, each file dropped from the page cache after it is closed: reads
that reach the storage as the job's do), on the storage as it is and on storage throttled (a device of its own,
a loop device over a file on the scratch disk, under a cgroup v1 blkio
throttle; see `Throttle`): reads below what N processes ask for, and
writes too, so that a checkpoint takes the time its
bytes need at a known rate rather than whatever the disk's own cache gives
that moment (a synced save is written by the caller, so the throttle holds
it). `--plan-only --bandwidth` predicts the throttled run.
The trace is also replayed at its own R ranks on the storage it was
captured on, against the captured run itself (same scale).

Prints one JSON document: per storage, the job's span, epoch times, AU
(its compute over its epoch time) and checkpoint times (the job's own record), the replay's (its report) and
the plan's prediction, and the relative errors. Exits 3, saying why on
stderr, when this machine cannot throttle or launch.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from meeting import free_port

JOBS = os.path.dirname(os.path.abspath(__file__))


def cannot(why):
    print(f"cannot run: {why}", file=sys.stderr)
    sys.exit(3)


class Throttle:
    """Storage of known bandwidth: a device of its own (an ext4 file system
    on a loop device over a sparse file in `scratch`, direct I/O to its
    backing file, so that none of it is cached below the file system), and
    a blkio cgroup (v1) whose members read that device at most `bps` bytes
    per second, and write it at most `write_bps` (when given). The job's
    code, libraries and the trace stay on the system disk, unthrottled, as
    a node's do beside the storage under test: the throttle allows a burst
    of what its slice left unused, so a job whose start-up read a few pages
    of its libraries through it 0.1-0.2 s before its first epoch had that
    epoch's first 10-16 MiB passed at once (1.50-1.58 s first epochs, where
    80 MiB/s gives 128 MiB and a step no less than 1.72 s). `root` is the
    device's mount; everything is undone by `close`, whatever happened."""

    def __init__(self, scratch, bps, write_bps=None, size_mib=2048):
        cg_root = "/sys/fs/cgroup/blkio"
        if not os.path.isfile(os.path.join(cg_root, "blkio.throttle.read_bps_device")):
            cannot("no cgroup v1 blkio controller with throttling at /sys/fs/cgroup/blkio")
        for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
            if shutil.which(tool) is None:
                cannot(f"{tool} is not installed (util-linux, e2fsprogs)")
        self.dir = self.root = None
        self.scratch = scratch
        self.image = os.path.join(scratch, "throttled.img")
        try:
            with open(self.image, "wb") as f:
                f.truncate(size_mib << 20)
            r = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", self.image],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                cannot(f"no loop device for the throttled storage: {r.stderr.strip()}")
            loop = r.stdout.strip()
            # The file system's read-ahead is its device's: the scratch
            # disk's, so that reads reach the throttle as they reach the
            # disk unthrottled.
            with open(f"/sys/block/{os.path.basename(loop)}/queue/read_ahead_kb", "w") as f:
                f.write(read_ahead_kb(scratch))
            run(["mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0", loop])
            root = os.path.join(scratch, "throttled")
            os.makedirs(root)
            run(["mount", loop, root])
            self.root = root
            self.dir = os.path.join(cg_root, f"iorepro-fidelity-{os.getpid()}")
            os.makedirs(self.dir, exist_ok=True)
            dev = os.stat(loop).st_rdev
            rule = f"{os.major(dev)}:{os.minor(dev)} {bps}"
            with open(os.path.join(self.dir, "blkio.throttle.read_bps_device"), "w") as f:
                f.write(rule)
            if write_bps:
                with open(os.path.join(self.dir, "blkio.throttle.write_bps_device"), "w") as f:
                    f.write(f"{os.major(dev)}:{os.minor(dev)} {write_bps}")
        except OSError as e:
            self.close()
            cannot(f"cannot set up the throttled storage: {e}")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def clear_leftovers(scratch):
        """The mount and the loop device of a throttled storage under
        `scratch`: what `close` undoes, and what a run killed before its
        `close` left."""
        subprocess.run(["umount", os.path.join(scratch, "throttled")], stderr=subprocess.DEVNULL)
        image = os.path.join(scratch, "throttled.img")
        r = subprocess.run(["losetup", "--associated", image, "--noheadings", "--output", "NAME"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for loop in r.stdout.split():
            subprocess.run(["losetup", "--detach", loop], stderr=subprocess.DEVNULL)

    def wrap(self, cmd):
        """`cmd` started inside the cgroup (a shell that joins it, then execs)."""
        return ["sh", "-c", f'echo $$ > {self.dir}/cgroup.procs && exec "$@"', "sh"] + cmd

    def close(self):
        if self.dir:
            try:
                os.rmdir(self.dir)
            except OSError:
                pass
        self.clear_leftovers(self.scratch)
        self.root = None
        try:
            os.unlink(self.image)
        except OSError:
            pass


def read_ahead_kb(path):
    """The read-ahead of the disk `path` lies on (a partition's is its
    disk's), as sysfs gives it; the kernel's default where none is found."""
    dev = os.stat(path).st_dev
    base = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    for queue in (f"{base}/queue", f"{base}/../queue"):
        try:
            with open(f"{queue}/read_ahead_kb") as f:
                return f.read().strip()
        except OSError:
            continue
    return "128"


def mpirun(n, script, args):
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(n),
            sys.executable, os.path.join(JOBS, script)] + args


class BenchLike:
    """The DLIO-like benchmark: reader threads are the process itself, one
    file a step, compute a sleep after each file; the ranks meet before and
    after each save, as DLIO's do at their MPI barriers (rank 0 saves, the
    others wait), or with `--no-meet` read on while rank 0 saves, as a job
    that saves in the background does."""

    name = "bench_like"

    def __init__(self, a):
        self.a = a

    def command(self, n, data, ckpt, report):
        a = self.a
        batch = []
        if a.batch == "global":
            # 8 samples a step over all ranks, a save every 2 steps: the
            # same steps and saves at any world size.
            batch = ["--global-batch", "8", "--ckpt-every-steps", "2"]
        return mpirun(n, "bench_like.py", [
            "--data", data, "--ckpt", ckpt, "--report", report, "--epochs", str(a.epochs),
            "--compute-s", str(a.compute_s), "--ckpt-mib", str(a.ckpt_mib), "--evict"]
            + ([] if a.no_meet else ["--meet-port", str(free_port())]) + batch)


class TrainDdp:
    """The PyTorch DDP job: DataLoader worker processes read ahead
    (`prefetch_factor`), the training loop computes a batch a step, and
    every rank saves its shard of a DCP checkpoint after each epoch. Its
    layers are small and each process keeps to one CPU thread, so that its
    step is the emulated accelerator compute, as a GPU job's is, and not
    ranks taking CPU from each other on a machine with fewer cores than
    ranks (a cost the job at N would not pay with a GPU each); a 48 MiB
    state buffer gives its checkpoints a large model's size."""

    name = "train_ddp"
    batch = 2

    def __init__(self, a):
        self.a = a

    def command(self, n, data, ckpt, report):
        a = self.a
        return mpirun(n, "train_ddp.py", [
            "--data", data, "--ckpt", ckpt, "--report", report, "--epochs", str(a.epochs),
            "--compute-s", str(a.compute_s), "--batch", str(self.batch), "--ckpt-every", "0",
            "--prefetch", "2", "--evict", "--hidden", "256", "--state-mib", "48", "--cpu-threads", "1"]
            + (["--workers-each-epoch"] if a.workers_each_epoch else []))


JOB_KINDS = {"bench_like": BenchLike, "train_ddp": TrainDdp}


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{cmd} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def evict(root):
    """Every file under `root` out of the page cache (the dataset, the
    replay's copies), the job's code and libraries staying in it, as on a
    node whose job has started before."""
    subprocess.run(["sync"])
    for d, _, names in os.walk(root):
        for n in names:
            try:
                fd = os.open(os.path.join(d, n), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


WRITE_PROBE = """
import os, sys, time
path, mib = sys.argv[1], int(sys.argv[2])
block = os.urandom(4 << 20)
t = time.monotonic()
with open(path, "wb") as f:
    for _ in range(mib // 4):
        f.write(block)
    f.flush()
    os.fsync(f.fileno())
print(time.monotonic() - t)
os.unlink(path)
"""


def write_rate_mib_s(root, mib, cgroup):
    """The storage's write rate as a user would measure it before asking
    the plan, in the job's way of saving (4 MiB writes of a checkpoint's
    size, then fsync), from inside the throttled cgroup: the median of
    three. The plan needs it apart from the read rate: a cgroup v1 blkio
    throttle holds the reads, but buffered writes reach the disk from the
    kernel's flusher, outside the cgroup, at the disk's own speed."""
    cmd = [sys.executable, "-c", WRITE_PROBE, os.path.join(root, "write-probe"), str(mib)]
    took = sorted(float(run(cgroup.wrap(cmd) if cgroup else cmd)) for _ in range(3))
    return mib / max(took[1], 1e-6)


def job_figures(r):
    """A job's own record (its --report) as the figures the replay's are
    judged against: span, epochs, AU and checkpoints, in seconds."""
    # The replay's epochs are the stretches of steps between saves; the
    # job's are too where it records them (one an epoch when it saves at
    # each epoch's end).
    if "stretches_ns" in r:
        spans = [(e - b, c) for b, e, c in r["stretches_ns"]]
    else:
        spans = [(e - b, c) for (b, e), c in zip(r["epoch_times_ns"], r["epoch_compute_ns"])]
    return {
        "span_s": (r["checkpoint_times_ns"][-1][1] - r["epoch_times_ns"][0][0]) / 1e9,
        "epochs_s": [d / 1e9 for d, _ in spans],
        # The job's own AU: its compute (its record) over its epoch time.
        "au_percent": [100 * min(1.0, c / d) for d, c in spans],
        "checkpoints_s": [(b - e) / 1e9 for e, b in r["checkpoint_times_ns"]],
    }


def replay_figures(rep, wall_s):
    """A replay's --json report as the same figures as `job_figures`."""
    t = rep["training"]
    return {
        # Span as the job's: from the first epoch to the last save's end
        # (the report's `span_s`, the slowest rank's), without the traced
        # start-up before the first epoch and what follows the last save,
        # which the whole replay holds.
        "span_s": t["span_s"],
        "duration_s": rep["duration_s"],
        "epochs_s": [e["duration_s"] for e in t["epochs"]],
        # The job records its whole epochs' compute over their time.
        "au_percent": [e["au_whole_epoch_percent"] for e in t["epochs"]],
        "checkpoints_s": [c["duration_s"] for c in t["checkpoints"]],
        "stall_s": rep["stall_s"],
        "wall_s": wall_s,
        "errors": rep["errors"],
    }


def err(a, b):
    return (a - b) / b if b else 0.0


def errors(got, truth):
    """`got`'s relative errors against `truth` (AU in points)."""
    n = min(len(truth["epochs_s"]), len(got["epochs_s"]))
    return {
        "span": err(got["span_s"], truth["span_s"]),
        "epochs": [err(got["epochs_s"][i], truth["epochs_s"][i]) for i in range(n)],
        "au_points": [got["au_percent"][i] - truth["au_percent"][i] for i in range(n)],
        "checkpoints": [err(r, j) for r, j in zip(got["checkpoints_s"], truth["checkpoints_s"])],
    }


def outside(v, a, b):
    """The end of the range of the job's two runs `a` and `b` nearer to
    `v`, where `v` lies outside it (None within it)."""
    lo, hi = min(a, b), max(a, b)
    return lo if v < lo else hi if v > hi else None


def beyond(v, a, b):
    """How far `v` lies outside that range, relative to its nearer end."""
    end = outside(v, a, b)
    return 0.0 if end is None else err(v, end)


def points_beyond(v, a, b):
    """The same for a figure in points (AU): the distance itself."""
    end = outside(v, a, b)
    return 0.0 if end is None else v - end


def errors_beyond(got, truth, again):
    """`got`'s errors beyond what the job's own two runs span: the part of
    the error the job's run-to-run variation does not explain (AU in points)."""
    n = min(len(truth["epochs_s"]), len(again["epochs_s"]), len(got["epochs_s"]))
    return {
        "span": beyond(got["span_s"], truth["span_s"], again["span_s"]),
        "epochs": [beyond(got["epochs_s"][i], truth["epochs_s"][i], again["epochs_s"][i]) for i in range(n)],
        "au_points": [points_beyond(got["au_percent"][i], truth["au_percent"][i], again["au_percent"][i])
                      for i in range(n)],
        "checkpoints": [beyond(r, j, k) for r, j, k in
                        zip(got["checkpoints_s"], truth["checkpoints_s"], again["checkpoints_s"])],
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--collect", required=True)
    p.add_argument("--replay", required=True)
    p.add_argument("--scratch", required=True)
    p.add_argument("--job", choices=sorted(JOB_KINDS), default="bench_like")
    p.add_argument("--traced", type=int, default=2)
    p.add_argument("--batch", choices=["per-rank", "global"], default="per-rank",
                   help="which batch the job holds fixed as it grows (the replay's --batch)")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--files", type=int, default=32)
    p.add_argument("--file-mib", type=int, default=4)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--compute-s", type=float, default=0.12)
    p.add_argument("--ckpt-mib", type=int, default=64)
    p.add_argument("--throttle-mib", type=int, default=80)
    p.add_argument("--throttle-write-mib", type=int, default=None,
                   help="writes' rate on the throttled storage (default: the reads' rate; "
                        "0: writes not throttled, so that a save takes what the disk's own "
                        "cache gives that moment)")
    p.add_argument("--workers-each-epoch", action="store_true",
                   help="train_ddp: its DataLoader forks its workers at each epoch's start")
    p.add_argument("--no-meet", action="store_true",
                   help="bench_like: the ranks do not meet around saves (the others read on)")
    p.add_argument("--storage", action="append", choices=["same_scale", "fast", "throttled"],
                   help="only these storages (repeatable; default: all three)")
    p.add_argument("--job-again", action="store_true",
                   help="run the job at N a second time: the machine's own run-to-run variation "
                        "(`job_variation`), and the replay's errors beyond the range of the two "
                        "runs (`errors_beyond_job`)")
    a = p.parse_args()
    if a.throttle_write_mib is None:
        a.throttle_write_mib = a.throttle_mib
    if os.geteuid() != 0:
        cannot("not root: throttling and capturing need root")
    if shutil.which("mpirun") is None:
        cannot("mpirun is not installed (apt package openmpi-bin)")
    kind = JOB_KINDS[a.job](a)
    if a.batch == "global" and a.job != "bench_like":
        cannot("--batch global is measured with the bench_like job")
    if a.job == "train_ddp":
        try:
            import torch  # noqa: F401
        except ImportError:
            cannot("PyTorch is not installed (cargo xtask setup installs it)")
    s = a.scratch
    Throttle.clear_leftovers(s)
    shutil.rmtree(s, ignore_errors=True)
    data = os.path.join(s, "data")
    os.makedirs(data)
    for i in range(a.files):
        with open(os.path.join(data, f"sample_{i:04d}.npz"), "wb") as f:
            f.write(os.urandom(a.file_mib << 20))
    # Only where a throttled run is asked for: a machine without cgroup v1
    # (cgroup v2 only, a VM) can still run the others.
    throttled = not a.storage or "throttled" in a.storage
    # Room for the dataset, the saves of two runs of the job, the
    # replay's copies and saves, and the write probes, twice over.
    needed_mib = 2 * (3 * a.files * a.file_mib + 4 * a.epochs * a.ckpt_mib * (2 if a.batch == "global" else 1))
    throttle = (Throttle(s, a.throttle_mib << 20, a.throttle_write_mib << 20, max(1024, needed_mib))
                if throttled else None)
    trace_dir = tempfile.mkdtemp(prefix="iorepro-fidelity-", dir="/dev/shm" if os.path.isdir("/dev/shm") else s)
    try:
        if throttle:
            # The job at N on the throttled storage reads its copy of the
            # dataset there.
            shutil.copytree(data, os.path.join(throttle.root, "data"))

        def bench(n, name, cgroup, collect=None):
            root = cgroup.root if cgroup else s
            ckpt = os.path.join(root, name, "ckpt")
            os.makedirs(ckpt)
            report = os.path.join(root, name, "report.json")
            cmd = kind.command(n, os.path.join(root, "data"), ckpt, report)
            cmd = cgroup.wrap(cmd) if cgroup else cmd
            run(collect + cmd if collect else cmd)
            with open(report) as f:
                return job_figures(json.load(f))

        # The trace lies off the throttled device, as a user's lies on the
        # node rather than on the storage under test: the replay's own
        # reading of it is no read of the job's, and on the throttled
        # device it cost the replay's first epoch about 0.06 s (4 %).
        trace = os.path.join(trace_dir, "trace")
        # The trace: the job at R on the storage as it is, as captured in production.
        evict(s)
        traced = bench(a.traced, "traced", None, [a.collect, "--out", trace, "--path-prefix", s, "--"])
        out = {"job": kind.name, "batch": a.batch, "traced_ranks": a.traced, "ranks": a.ranks, "throttle_mib_s": a.throttle_mib,
               "throttle_write_mib_s": a.throttle_write_mib}
        # What the plan saw of the ranks at the saves: met, or read on.
        out["meetings"] = json.loads(run([a.replay, trace, "--ranks", str(a.ranks), "--plan-only", "--json",
                                          "--batch", a.batch]))["meetings"]
        for storage, n in [("same_scale", a.traced), ("fast", a.ranks), ("throttled", a.ranks)]:
            if a.storage and storage not in a.storage:
                continue
            cgroup = throttle if storage == "throttled" else None
            evict(s)
            truth = traced if storage == "same_scale" else bench(n, f"job-{storage}", cgroup)
            again = None
            if a.job_again and storage != "same_scale":
                evict(s)
                again = bench(n, f"job-{storage}-again", cgroup)
            target = os.path.join(cgroup.root if cgroup else s, f"target-{storage}")
            run([a.replay, trace, "--target", target, "--ranks", str(n), "--prepare", "only"])
            evict(s)
            cmd = [a.replay, trace, "--target", target, "--ranks", str(n), "--timing", "original",
                   "--evict-reads", "--prepare", "skip", "--json", "--batch", a.batch]
            started = time.time()
            rep = json.loads(run(cgroup.wrap(cmd) if cgroup else cmd))
            replay = replay_figures(rep, time.time() - started)
            side = {"job": truth, "replay": replay}
            if cgroup:
                # The plan is told the storage's rates: the throttle's,
                # as a volume's QoS states them, or, where writes are not
                # throttled, what a user measures of the disk.
                write_mib_s = a.throttle_write_mib or write_rate_mib_s(cgroup.root, a.ckpt_mib, cgroup)
                rates = ["--bandwidth", f"{a.throttle_mib}MiB/s",
                         "--write-bandwidth", f"{write_mib_s:.1f}MiB/s"]
                plan = json.loads(run([a.replay, trace, "--ranks", str(n), "--plan-only", "--json",
                                       "--batch", a.batch] + rates))
                made = [c for c in plan["checkpoints"] if c["phase"] not in plan["saves"]["dropped"]]
                side["plan"] = {
                    "epochs_s": [e["seconds"] for e in plan["epochs_at_bandwidth"]],
                    "au_percent": [e["au_whole_epoch_percent"] for e in plan["epochs_at_bandwidth"]],
                    "bandwidth_for_au_gib_s": plan["bandwidth_for_au_gib_s"],
                    "checkpoints_s": [c["seconds_at_bandwidth"] for c in made],
                    "write_mib_s": round(write_mib_s, 1),
                }
            side["errors"] = errors(replay, truth)
            if again:
                side["job_again"] = again
                side["job_variation"] = errors(again, truth)
                side["errors_beyond_job"] = errors_beyond(replay, truth, again)
            if "plan" in side:
                side["errors"]["plan_epochs"] = [err(p, j) for p, j in zip(side["plan"]["epochs_s"], truth["epochs_s"])]
                side["errors"]["plan_checkpoints"] = [
                    err(p, j) for p, j in zip(side["plan"]["checkpoints_s"], truth["checkpoints_s"])]
                if again:
                    # The plan judged as the replay is: beyond the job's own two runs.
                    side["errors_beyond_job"]["plan_epochs"] = [
                        beyond(p, j, k) for p, j, k in
                        zip(side["plan"]["epochs_s"], truth["epochs_s"], again["epochs_s"])]
                    side["errors_beyond_job"]["plan_checkpoints"] = [
                        beyond(p, j, k) for p, j, k in
                        zip(side["plan"]["checkpoints_s"], truth["checkpoints_s"], again["checkpoints_s"])]
            out[storage] = side
        print(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(trace_dir, ignore_errors=True)
        if throttle:
            throttle.close()


if __name__ == "__main__":
    main()
