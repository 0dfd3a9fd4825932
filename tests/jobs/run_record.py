"""What a launched job writes about itself, as Hydra-configured training
jobs and benchmarks do: the launcher's rank and world size, a run
directory with `.hydra/config.yaml`, `hydra.yaml` and `overrides.yaml`
written once at the start, a log appended line by line through the run,
and at the end a `summary.json`, a `per_epoch_stats.json` and one
`{rank}_output.json` per rank. The tests use these files to check that a
whole capture gives logs and run records their own roles, never a
checkpoint's.
"""

import json
import logging
import os
import sys

# The variables each launcher sets, in the order they are tried: torchrun,
# Open MPI, MPICH/PMI, Slurm.
RANK_VARS = ["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"]
WORLD_VARS = ["WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"]
LOCAL_VARS = ["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"]


def _first(names, default):
    for n in names:
        if n in os.environ:
            return int(os.environ[n])
    return default


def rank_and_world():
    """This process's rank and the world size, from whichever launcher started it."""
    return _first(RANK_VARS, 0), _first(WORLD_VARS, 1)


def as_torchrun():
    """Sets torchrun's variables from another launcher's, so that
    torch.distributed's env:// rendezvous works under mpirun or srun."""
    rank, world = rank_and_world()
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(world))
    os.environ.setdefault("LOCAL_RANK", str(_first(LOCAL_VARS, 0)))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")


class RunRecord:
    """A run directory: configuration at the start, a log through the run,
    results at the end. Only rank 0 writes the configuration, log and summary;
    every rank writes its own output."""

    def __init__(self, out, rank, config):
        self.out, self.rank = out, rank
        self.epochs = []
        self.log = logging.getLogger("run")
        if out is None:
            return
        hydra = os.path.join(out, ".hydra")
        os.makedirs(hydra, exist_ok=True)
        if rank == 0:
            lines = "".join(f"{k}: {v}\n" for k, v in sorted(config.items()))
            for name, text in [
                ("config.yaml", lines),
                ("hydra.yaml", f"hydra:\n  run:\n    dir: {out}\n  job:\n    name: train\n"),
                ("overrides.yaml", "".join(f"- {k}={v}\n" for k, v in sorted(config.items()))),
            ]:
                with open(os.path.join(hydra, name), "w") as f:
                    f.write(text)
            handler = logging.FileHandler(os.path.join(out, "train.log"))
            handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s"))
            self.log.addHandler(handler)
            self.log.setLevel(logging.INFO)
            self.log.info("run started: %s", json.dumps(config, sort_keys=True))

    def note(self, fmt, *args):
        """A line in the log, and on stdout (which the launcher may redirect)."""
        if self.rank == 0:
            self.log.info(fmt, *args)
            print(fmt % args, flush=True)

    def epoch(self, epoch, start_ns, end_ns, samples):
        self.epochs.append({"epoch": epoch, "start_ns": start_ns, "end_ns": end_ns, "samples": samples})
        self.note("epoch %d: %d samples in %.3f s", epoch, samples, (end_ns - start_ns) / 1e9)

    def finish(self, results):
        if self.out is None:
            return
        with open(os.path.join(self.out, f"{self.rank}_output.json"), "w") as f:
            json.dump({"rank": self.rank, "epochs": self.epochs}, f)
        if self.rank == 0:
            with open(os.path.join(self.out, "per_epoch_stats.json"), "w") as f:
                json.dump(self.epochs, f)
            with open(os.path.join(self.out, "summary.json"), "w") as f:
                json.dump(results, f)
            self.note("run done")
        sys.stdout.flush()
