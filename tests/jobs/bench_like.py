"""A storage benchmark shaped like DLIO's training workloads: each of
WORLD_SIZE processes (torchrun sets RANK and WORLD_SIZE) reads its share of
the sample files every epoch, a shuffled share as a distributed sampler
deals it, in 1 MiB reads, with a little compute per sample; at the end of
every epoch rank 0 alone writes a checkpoint of --ckpt-mib MiB in 4 MiB
writes and syncs it. With --report, rank 0 writes when each of its epochs
(reading) and checkpoints ran, by the wall clock in ns, as JSON.
"""

import argparse
import json
import os
import random
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--ckpt-mib", type=int, default=16)
    p.add_argument("--compute-s", type=float, default=0.002)
    p.add_argument("--report")
    args = p.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    files = sorted(os.path.join(args.data, n) for n in os.listdir(args.data))
    block = os.urandom(4 << 20)
    epoch_times, checkpoint_times = [], []
    for epoch in range(args.epochs):
        epoch_start = time.time_ns()
        order = list(range(len(files)))
        random.Random(epoch).shuffle(order)
        for i in order[rank::world]:
            with open(files[i], "rb") as f:
                while f.read(1 << 20):
                    pass
            time.sleep(args.compute_s)
        epoch_times.append([epoch_start, time.time_ns()])
        if rank == 0:
            ckpt_start = time.time_ns()
            path = os.path.join(args.ckpt, f"checkpoint_epoch_{epoch}.pt")
            with open(path, "wb") as f:
                for _ in range(args.ckpt_mib // 4):
                    f.write(block)
                f.flush()
                os.fsync(f.fileno())
            checkpoint_times.append([ckpt_start, time.time_ns()])
    if rank == 0 and args.report:
        with open(args.report, "w") as f:
            json.dump({"epoch_times_ns": epoch_times, "checkpoint_times_ns": checkpoint_times}, f)


if __name__ == "__main__":
    main()
