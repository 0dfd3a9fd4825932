"""Same scale on a job whose loop, checkpoints and logs are a framework's
(train_vision.py: PyTorch Lightning, on the GPU where there is one): the job
runs twice as it is and once under the collector, captured whole as a user
captures a job (no path prefix); the trace is replayed at its own ranks with
`--timing original` into a target on the same storage. The dataset leaves
the page cache before each run and the replay's prepared copy before the
replay, so each starts as the job's first run did.

Prints one JSON document:
- `job`, `job_again`, `traced`: the three runs' own records (span, epochs,
  AU, checkpoints), and their wall time from launch to exit;
- `capture_cost`: the traced run's span and wall time against the mean of
  the two others (what capturing cost the job);
- `replay` and `errors`: the replay's figures and their relative errors
  against the traced run (its own record of the run that was captured),
  `errors_beyond_job` what of them the job's own run-to-run variation does
  not explain;
- `phases`: the checkpoint phases `iorepro-trace phases` finds in the
  trace, each one's seconds, and `errors["phases_checkpoints"]` against
  the traced run's own saves;
- `roles`: the role the trace gave each of the job's files (dataset images,
  Lightning's .ckpt files, its hparams.yaml and metrics.csv) against what
  they are, and the replay's `left_out` (what it left out and why).
With --keep DIR, the trace is also packed into DIR/trace.tar.gz beside the
JSON document, for analysis elsewhere.
"""

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time

from time_fidelity import err, errors, errors_beyond, evict, job_figures, replay_figures, run

JOBS = os.path.dirname(os.path.abspath(__file__))

# What each of the job's files is, by where it keeps it and its name.
TRUE_ROLES = [
    ("data", None, {"dataset"}),
    ("run/checkpoints", ".ckpt", {"checkpoint"}),
    ("run/logs", None, {"log", "output"}),
]


def role_truth(files, scratch):
    """Each kind of the job's files: how many the trace names, how many
    have a right role, and the first few that do not."""
    out = {}
    for prefix, suffix, right in TRUE_ROLES:
        root = os.path.join(scratch, prefix) + "/"
        mine = [f for f in files if f["path"].startswith(root) and not f["directory"]
                and (suffix is None or f["path"].endswith(suffix))]
        wrong = [(f["path"], f["role"]) for f in mine if f["role"] not in right]
        out[prefix] = {"files": len(mine), "right": len(mine) - len(wrong), "wrong": wrong[:5]}
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--collect", required=True)
    p.add_argument("--replay", required=True)
    p.add_argument("--trace-tool", required=True)
    p.add_argument("--scratch", required=True)
    p.add_argument("--keep", help="a folder for the trace's tarball and the JSON document")
    p.add_argument("--python", default=sys.executable, help="the interpreter that has Lightning")
    p.add_argument("--images", type=int, default=6400)
    p.add_argument("--arch", default="resnet50")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--crop", type=int, default=224)
    p.add_argument("--state-mib", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="the job's compute threads (0: PyTorch's default)")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("cannot run: capturing needs root", file=sys.stderr)
        sys.exit(3)
    s = a.scratch
    subprocess.run(["rm", "-rf", s], check=True)
    data = os.path.join(s, "data")
    job = os.path.join(JOBS, "train_vision.py")
    started = time.time()
    run([a.python, job, "--data", data, "--make-data", "--images", str(a.images)])
    out = {"dataset_s": time.time() - started}

    def train(name, collect=None):
        # Every run keeps its files in the same place, so the traced run's
        # paths are the others'.
        subprocess.run(["rm", "-rf", os.path.join(s, "run")], check=True)
        report = os.path.join(s, f"{name}.json")
        cmd = [a.python, job, "--data", data, "--root", os.path.join(s, "run"), "--report", report,
               "--arch", a.arch, "--batch", str(a.batch), "--workers", str(a.workers),
               "--epochs", str(a.epochs), "--steps", str(a.steps), "--crop", str(a.crop),
               "--state-mib", str(a.state_mib), "--threads", str(a.threads)]
        evict(data)
        began = time.time()
        run(collect + cmd if collect else cmd)
        wall = time.time() - began
        with open(report) as f:
            r = json.load(f)
        figures = job_figures(r)
        figures.update(wall_s=wall, device=r["device"], steps=r["steps"], checkpoint_files=r["checkpoints"])
        # As it comes, so that a later step's failure does not lose it.
        print(json.dumps({name: figures}), file=sys.stderr)
        return figures

    trace = os.path.join(s, "trace")
    out["job"] = train("job")
    out["traced"] = train("traced", [a.collect, "--out", trace, "--"])
    out["job_again"] = train("job_again")
    untraced = [out["job"], out["job_again"]]
    out["capture_cost"] = {
        k: out["traced"][k] / (sum(j[k] for j in untraced) / 2) - 1 for k in ("span_s", "wall_s")}
    files = json.loads(run([a.trace_tool, "files", "--json", trace]))
    out["roles"] = role_truth(files["files"], s)
    out["roles"]["by_role"] = {k: v for k, v in files["roles"].items() if v["files"] or v["directories"]}

    target = os.path.join(s, "target")
    run([a.replay, trace, "--target", target, "--prepare", "only"])
    evict(target)
    began = time.time()
    rep = json.loads(run([a.replay, trace, "--target", target, "--timing", "original", "--prepare", "skip",
                          "--json"]))
    out["replay"] = replay_figures(rep, time.time() - began)
    out["replay"]["results_differed"] = rep["results_differed"]
    out["roles"]["left_out"] = rep["left_out"]
    out["errors"] = errors(out["replay"], out["traced"])
    phases = json.loads(run([a.trace_tool, "phases", "--json", trace]))["phases"]
    saves = [p["end_s"] - p["start_s"] for p in phases if p["kind"] == "checkpoint"]
    out["phases"] = {"checkpoints_s": saves}
    out["errors"]["phases_checkpoints"] = [err(p, j) for p, j in zip(saves, out["traced"]["checkpoints_s"])]
    out["errors_beyond_job"] = errors_beyond(out["replay"], out["traced"], out["job"])
    document = json.dumps(out, indent=1)
    print(document)
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        with open(os.path.join(a.keep, "same_scale.json"), "w") as f:
            f.write(document)
        with tarfile.open(os.path.join(a.keep, "trace.tar.gz"), "w:gz") as t:
            t.add(trace, arcname="trace")


if __name__ == "__main__":
    main()
