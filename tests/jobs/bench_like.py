"""A storage benchmark shaped like DLIO's training workloads: each of the
launcher's processes (torchrun, mpirun or srun set the rank and world size)
reads its share of the sample files every epoch, a shuffled share as a
distributed sampler deals it, in 1 MiB reads, with a little compute per
sample; rank 0 alone writes a checkpoint of --ckpt-mib MiB in 4 MiB writes
and syncs it, at the end of every epoch, or every --ckpt-every-steps
samples of its own. With --evict, each file read leaves the page cache
again (a dataset larger than memory, whose reads always reach the storage).
With --out, the run keeps a Hydra-style run directory
and log (see run_record.py). With --report, rank 0 writes when each of its
epochs (reading) and checkpoints ran, by the wall clock in ns, its compute
in each epoch, and each stretch of steps between two saves with its
compute, as JSON. With --global-batch, a step is the rank's share of a
global batch, so a job run at any world size makes the same steps and saves.
"""

import argparse
import json
import os
import random
import time

from meeting import Meeting
from run_record import RunRecord, rank_and_world


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--ckpt-mib", type=int, default=16)
    p.add_argument("--ckpt-every-steps", type=int, default=0, help="0: at the end of every epoch")
    p.add_argument("--compute-s", type=float, default=0.002, help="compute per sample")
    p.add_argument("--global-batch", type=int, default=0,
                   help="samples per step over all ranks (0: one sample per rank a step); "
                        "each rank reads its share of them a step, so the steps per epoch "
                        "and the saves every --ckpt-every-steps stay the same at any world size")
    p.add_argument("--evict", action="store_true", help="drop each file from the page cache after reading it")
    p.add_argument("--meet-port", type=int, default=0,
                   help="a free TCP port on this host: the ranks meet before their first epoch "
                        "and before and after each save (0: they do not meet)")
    p.add_argument("--out", help="a Hydra-style run directory and log")
    p.add_argument("--report")
    args = p.parse_args()
    rank, world = rank_and_world()
    meet = Meeting(args.meet_port, rank, world)
    # The checkpoint's bytes are set-up: made after the barrier, 4 ranks
    # making 4 MiB each (10-14 ms of CPU) on 2 cores began reading apart, in
    # two pairs, and the throttled storage served the first pair ahead
    # through the whole first stretch (0.94-0.96 s against 1.13-1.15 s).
    block = os.urandom(4 << 20)
    # The ranks start their first epoch together, as DLIO's do after the
    # barrier that ends its set-up: rank 0 is the last to be connected,
    # and without it the others would read before rank 0's clock, which
    # times the epochs, starts (its first epoch would leave that out).
    meet()
    record = RunRecord(args.out, rank, vars(args))
    files = sorted(os.path.join(args.data, n) for n in os.listdir(args.data))
    epoch_times, epoch_compute, checkpoint_times, saves = [], [], [], []
    # The stretches of steps between saves: [start, end, compute] in ns.
    stretches, stretch = [], [None, None, 0]

    def checkpoint(tag):
        """Every rank comes here; rank 0 saves. Waiting for the others to
        arrive is the stretch's (a stall); the save runs until all leave."""
        meet()
        ckpt_start = time.time_ns()
        stretches.append([stretch[0], ckpt_start, stretch[2]])
        if rank == 0:
            path = os.path.join(args.ckpt, f"checkpoint_{tag}.pt")
            with open(path, "wb") as f:
                for _ in range(args.ckpt_mib // 4):
                    f.write(block)
                f.flush()
                os.fsync(f.fileno())
            saves.append(path)
            record.note("saved %s", path)
        meet()
        checkpoint_times.append([ckpt_start, time.time_ns()])
        stretch[:] = [checkpoint_times[-1][1], None, 0]

    per_step = max(1, args.global_batch // world) if args.global_batch else 1
    step = 0
    for epoch in range(args.epochs):
        epoch_start = time.time_ns()
        if stretch[0] is None:
            stretch[0] = epoch_start
        compute_ns = 0
        order = list(range(len(files)))
        random.Random(epoch).shuffle(order)
        mine = order[rank::world]
        for first in range(0, len(mine), per_step):
            batch = mine[first:first + per_step]
            for i in batch:
                with open(files[i], "rb") as f:
                    while f.read(1 << 20):
                        pass
                    if args.evict:
                        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            compute_start = time.time_ns()
            time.sleep(args.compute_s * len(batch))
            compute_ns += time.time_ns() - compute_start
            stretch[2] += time.time_ns() - compute_start
            step += 1
            if args.ckpt_every_steps and step % args.ckpt_every_steps == 0:
                checkpoint(f"step_{step}")
        epoch_times.append([epoch_start, time.time_ns()])
        epoch_compute.append(compute_ns)
        record.epoch(epoch, epoch_start, time.time_ns(), len(mine))
        if not args.ckpt_every_steps:
            checkpoint(f"epoch_{epoch}")
    if stretch[2]:
        stretches.append([stretch[0], epoch_times[-1][1], stretch[2]])
    results = {"epoch_times_ns": epoch_times, "epoch_compute_ns": epoch_compute, "stretches_ns": stretches, "checkpoint_times_ns": checkpoint_times, "checkpoints": saves}
    record.finish({"world": world, "files": len(files), **results})
    if rank == 0 and args.report:
        with open(args.report, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
