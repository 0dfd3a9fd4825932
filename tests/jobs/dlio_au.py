"""AU against MLPerf Storage's own benchmark, DLIO, on throttled storage:
the replay's `training.epochs[].au_percent` (DLIO's rule, see
replayer/src/report/au.rs) and `au_whole_epoch_percent` beside the
`train_au_percentage` of DLIO's `summary.json`.

The storage is time_fidelity.py's `Throttle`: an ext4 file system on a loop
device of its own, read under a cgroup v1 blkio throttle (`--throttle-mib`);
only what runs inside the cgroup is throttled.

DLIO's rank 0 saves a small model (`--ckpt-mib`) at each epoch's end: the
replay tells a trace's epochs apart by the saves between them (without
them the three epochs are one stretch, with one AU). DLIO then ends each
epoch's block after the barrier that follows its last step (it ends it a
second time there), as MLPerf Storage's workloads with checkpoints do.

1. DLIO generates its npz dataset on the throttled mount.
2. DLIO trains at `--traced` processes under the collector
   (`--path-prefix` the data and checkpoint folders), outside the cgroup:
   the storage as it is, as a job is captured in production (with
   `--capture-throttled`, inside the cgroup).
3. `--repeat` times: DLIO trains at `--ranks` processes inside the cgroup;
   then the trace is replayed at `--ranks` ranks inside the cgroup with
   `--timing original --evict-reads --batch per-rank` (DLIO's batch size is
   per rank: at N each rank makes R/N of the traced steps). The page cache
   is dropped before each run.

DLIO reads each sample file whole (`np.load`) through buffered I/O; on this
machine a dataset this small stays in the page cache after the first epoch,
while the replay's `--evict-reads` drops each file after reading it, as a
dataset larger than memory would. So that both read the storage in every
epoch, DLIO runs through a launcher that drops each sample file from the
page cache after `NPZReader.open` has read it (`posix_fadvise(DONTNEED)` on
the same descriptor: no extra open or read); `--no-evict` runs DLIO as it
is and replays without `--evict-reads`.

    python3 tests/jobs/dlio_au.py --collect target/release/iorepro-collect \
        --replay target/release/iorepro-replay --scratch /tmp/dlio-au

takes about 1.5 minutes with the defaults (2 rounds) on a 2-core VM.
`--files 256 --batch 4 --read-threads 4 --compute-s 0.2` (about 2.5
minutes) gives each DLIO rank a deeper read-ahead at the epoch's start
(4 workers' batches, 32 MiB): its first step waits 1.3-2.1 s, which DLIO's
AU leaves out; the replay's rank reads R/N of its traced rank's read-ahead
before its first step (the traced rank's visits are dealt one at a time to
the ranks that share it), so less of the wait falls in its first step and
its AU by DLIO's rule comes out lower than DLIO's.

Needs DLIO (`--dlio-python`: a Python with dlio_benchmark 2.0.0; see
replayer/tests/data/dlio-2.0.0/README.md for the install), root, Open MPI.
Prints a table and one JSON document (`--json-out`). Exits 3, saying why on
stderr, when this machine cannot throttle or launch.
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

from time_fidelity import Throttle, cannot, run

WORKLOAD = """\
model: iorepro_au

framework: pytorch

workflow:
  generate_data: False
  train: True
  checkpoint: True

dataset:
  data_folder: {data}
  format: npz
  num_files_train: {files}
  num_samples_per_file: 1
  record_length: {record}

reader:
  data_loader: pytorch
  batch_size: {batch}
  read_threads: {threads}
  file_shuffle: seed
  sample_shuffle: seed

train:
  epochs: {epochs}
  computation_time: {compute}

checkpoint:
  checkpoint_folder: {ckpt}
  checkpoint_after_epoch: 1
  epochs_between_checkpoints: 1
  model_size: {model}

metric:
  au: 0.90
"""

# DLIO's entry point, with each sample file dropped from the page cache
# once read (see the module's doc).
LAUNCHER = """\
import os, sys
import numpy as np
if os.environ.get("IOREPRO_DLIO_EVICT") == "1":
    from dlio_benchmark.reader.npz_reader import NPZReader
    from dlio_benchmark.reader.reader_handler import FormatReader

    def open_evicting(self, filename):
        FormatReader.open(self, filename)
        with open(filename, "rb") as f:
            x = np.load(f, allow_pickle=True)["x"]
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        return x

    NPZReader.open = open_evicting
from dlio_benchmark.main import main
sys.exit(main())
"""


def drop_caches():
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def dlio_cmd(a, n, conf, out, extra=()):
    return (["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(n),
             "-x", "IOREPRO_DLIO_EVICT", a.dlio_python, os.path.join(conf, "launch.py"),
             "--config-dir", conf, "workload=iorepro_au", f"++workload.output.folder={out}",
             f"hydra.run.dir={out}/hydra"] + list(extra))


def dlio_figures(out, batch):
    """DLIO's own record: summary's AU per epoch, and per epoch over the
    ranks the block's time (recovered from its throughput, as
    replayer/tests/dlio_au.rs does), the first step's, the later steps'
    mean and the whole block's compute over its time."""
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    n = summary["num_accelerators"]
    ranks = []
    for r in range(n):
        with open(os.path.join(out, f"{r}_output.json")) as f:
            ranks.append(json.load(f))
    epochs = []
    for e in range(1, summary["epochs"] + 1):
        per = []
        for o in ranks:
            ep = o[str(e)]
            proc, comp = ep["proc"]["block1"], ep["compute"]["block1"]
            block = len(comp) * batch / ep["throughput"]["block1"]
            per.append({"block_s": block, "first_step_s": proc[0],
                        "later_step_s": sum(proc[1:]) / max(1, len(proc) - 1),
                        "steps": len(proc), "au": ep["au"]["block1"],
                        "au_whole": 100 * sum(comp) / block})
        mean = lambda k: sum(p[k] for p in per) / len(per)  # noqa: E731
        epochs.append({
            "au_percent": summary["metric"]["train_au_percentage"][e - 1],
            "au_whole_epoch_percent": mean("au_whole"),
            "block_s": mean("block_s"), "block_max_s": max(p["block_s"] for p in per),
            "first_step_s": mean("first_step_s"), "later_step_s": mean("later_step_s"),
            "steps": per[0]["steps"],
            "first_step_per_rank_s": [round(p["first_step_s"], 4) for p in per],
        })
    return {"epochs": epochs, "au_mean_percent": summary["metric"]["train_au_mean_percentage"]}


def replay_figures(rep, wall_s):
    t = rep["training"]
    return {
        "wall_s": round(wall_s, 2),
        "epochs": [{"au_percent": e["au_percent"], "au_whole_epoch_percent": e["au_whole_epoch_percent"],
                    "duration_s": e["duration_s"], "compute_s": e["compute_s"], "stall_s": e["stall_s"],
                    "samples": e["samples"], "phases": e["phases"]} for e in t["epochs"]],
        "au_mean_percent": t["au_mean_percent"],
        "checkpoints_s": [c["duration_s"] for c in t["checkpoints"]],
    }


def table(rounds):
    lines = []
    for i, rnd in enumerate(rounds, 1):
        d, r = rnd["dlio"]["epochs"], rnd["replay"]["epochs"]
        lines.append(f"round {i}: epoch  DLIO AU  replay AU (diff)   DLIO whole  replay whole (diff)"
                     "   DLIO block/first/later s   replay epoch s")
        for e in range(max(len(d), len(r))):
            de = d[e] if e < len(d) else None
            re_ = r[e] if e < len(r) else None
            if de is None or re_ is None:
                lines.append(f"         {e + 1}  missing on one side")
                continue
            lines.append(
                f"         {e + 1}  {de['au_percent']:7.2f}  {re_['au_percent']:9.2f} ({re_['au_percent'] - de['au_percent']:+6.2f})"
                f"   {de['au_whole_epoch_percent']:9.2f}  {re_['au_whole_epoch_percent']:11.2f} "
                f"({re_['au_whole_epoch_percent'] - de['au_whole_epoch_percent']:+6.2f})"
                f"   {de['block_s']:6.2f}/{de['first_step_s']:5.2f}/{de['later_step_s']:5.3f}"
                f"       {re_['duration_s']:6.2f}")
        dm = rnd["dlio"]["au_mean_percent"]
        rm = rnd["replay"]["au_mean_percent"]
        dw = sum(e["au_whole_epoch_percent"] for e in d) / len(d)
        rw = sum(e["au_whole_epoch_percent"] for e in r) / max(1, len(r))
        lines.append(f"      mean  {dm:7.2f}  {rm:9.2f} ({rm - dm:+6.2f})   {dw:9.2f}  {rw:11.2f} ({rw - dw:+6.2f})")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--collect", required=True)
    p.add_argument("--replay", required=True)
    p.add_argument("--scratch", required=True)
    p.add_argument("--dlio-python", default="/opt/dlio-venv/bin/python")
    p.add_argument("--traced", type=int, default=2)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--files", type=int, default=128)
    p.add_argument("--file-mib", type=int, default=2)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--read-threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--compute-s", type=float, default=0.1)
    p.add_argument("--ckpt-mib", type=int, default=16,
                   help="the model DLIO's rank 0 saves at each epoch's end: the saves part the "
                        "trace's epochs, as the replay tells epochs apart by its saves")
    p.add_argument("--throttle-mib", type=int, default=80)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--capture-throttled", action="store_true",
                   help="capture the traced run inside the throttled cgroup too")
    p.add_argument("--no-evict", action="store_true",
                   help="DLIO as it is (its later epochs from the page cache), the replay without --evict-reads")
    p.add_argument("--json-out", help="also write the JSON document here")
    p.add_argument("--keep", help="copy the trace, DLIO's outputs and the replays' reports into this folder")
    p.add_argument("--record-ops", action="store_true",
                   help="with --keep: the replays also record what they did (--record-ops), into "
                        "round-I/replay-ops there")
    a = p.parse_args()
    if os.geteuid() != 0:
        cannot("not root: throttling, capturing and dropping caches need root")
    if shutil.which("mpirun") is None:
        cannot("mpirun is not installed (apt package openmpi-bin)")
    if subprocess.run([a.dlio_python, "-c", "import dlio_benchmark.main"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        cannot(f"{a.dlio_python} cannot import dlio_benchmark.main (DLIO 2.0.0, see "
               "replayer/tests/data/dlio-2.0.0/README.md)")
    os.environ["IOREPRO_DLIO_EVICT"] = "0" if a.no_evict else "1"
    s = a.scratch
    Throttle.clear_leftovers(s)
    shutil.rmtree(s, ignore_errors=True)
    os.makedirs(s)
    throttle = Throttle(s, a.throttle_mib << 20, None, max(1024, 4 * a.files * a.file_mib))
    work = tempfile.mkdtemp(prefix="iorepro-dlio-au-", dir="/dev/shm" if os.path.isdir("/dev/shm") else s)
    try:
        data = os.path.join(throttle.root, "data")
        ckpt = os.path.join(throttle.root, "ckpt")
        os.makedirs(ckpt)
        conf = os.path.join(work, "conf")
        os.makedirs(os.path.join(conf, "workload"))
        with open(os.path.join(conf, "workload", "iorepro_au.yaml"), "w") as f:
            f.write(WORKLOAD.format(data=data, ckpt=ckpt, files=a.files, record=a.file_mib << 20,
                                    batch=a.batch, threads=a.read_threads, epochs=a.epochs,
                                    compute=a.compute_s, model=a.ckpt_mib << 20))
        with open(os.path.join(conf, "launch.py"), "w") as f:
            f.write(LAUNCHER)
        started = time.time()
        # 1. The dataset, on the throttled mount (writes are not throttled).
        run(dlio_cmd(a, 2, conf, os.path.join(work, "gen"),
                     ["++workload.workflow.generate_data=True", "++workload.workflow.train=False"]),
            cwd=work)
        # 2. The trace, at R.
        trace = os.path.join(work, "trace")
        drop_caches()
        cmd = dlio_cmd(a, a.traced, conf, os.path.join(work, "traced"))
        if a.capture_throttled:
            cmd = throttle.wrap(cmd)
        run([a.collect, "--out", trace, "--path-prefix", data, "--path-prefix", ckpt, "--"] + cmd, cwd=work)
        traced = dlio_figures(os.path.join(work, "traced"), a.batch)
        target = os.path.join(throttle.root, "target")
        run([a.replay, trace, "--target", target, "--ranks", str(a.ranks), "--batch", "per-rank",
             "--prepare", "only"])
        out = {"dlio": "2.0.0", "traced_ranks": a.traced, "ranks": a.ranks, "throttle_mib_s": a.throttle_mib,
               "files": a.files, "file_mib": a.file_mib, "batch": a.batch, "read_threads": a.read_threads,
               "compute_s": a.compute_s, "epochs": a.epochs, "ckpt_mib": a.ckpt_mib, "evict": not a.no_evict,
               "capture_throttled": a.capture_throttled, "traced": traced, "rounds": []}
        for i in range(a.repeat):
            # 3. DLIO at N, then the replay at N, both throttled.
            dout = os.path.join(work, f"dlio-{i + 1}")
            drop_caches()
            run(throttle.wrap(dlio_cmd(a, a.ranks, conf, dout)), cwd=work)
            dlio = dlio_figures(dout, a.batch)
            drop_caches()
            cmd = [a.replay, trace, "--target", target, "--ranks", str(a.ranks), "--timing", "original",
                   "--batch", "per-rank", "--prepare", "skip", "--json"]
            if not a.no_evict:
                cmd.append("--evict-reads")
            if a.keep and a.record_ops:
                os.makedirs(os.path.join(a.keep, f"round-{i + 1}"), exist_ok=True)
                cmd += ["--record-ops", os.path.join(a.keep, f"round-{i + 1}", "replay-ops")]
            t = time.time()
            text = run(throttle.wrap(cmd))
            rep = json.loads(text)
            replay = replay_figures(rep, time.time() - t)
            if a.keep:
                keep = os.path.join(a.keep, f"round-{i + 1}")
                shutil.copytree(dout, os.path.join(keep, "dlio"), dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("hydra", "*.pfw*"))
                with open(os.path.join(keep, "replay.json"), "w") as f:
                    f.write(text)
            out["rounds"].append({"dlio": dlio, "replay": replay})
        if a.keep:
            shutil.copytree(trace, os.path.join(a.keep, "trace"), dirs_exist_ok=True)
            shutil.copytree(os.path.join(work, "traced"), os.path.join(a.keep, "traced"), dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("hydra", "*.pfw*"))
        out["wall_s"] = round(time.time() - started, 1)
        print(table(out["rounds"]))
        doc = json.dumps(out, indent=1)
        print(doc)
        if a.json_out:
            with open(a.json_out, "w") as f:
                f.write(doc + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        throttle.close()


if __name__ == "__main__":
    main()
