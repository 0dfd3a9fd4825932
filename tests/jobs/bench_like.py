"""A storage benchmark shaped like DLIO's training workloads: each of
WORLD_SIZE processes (torchrun sets RANK and WORLD_SIZE) reads its share of
the sample files every epoch, a shuffled share as a distributed sampler
deals it, in 1 MiB reads, with a little compute per sample; at the end of
every epoch rank 0 alone writes a checkpoint of --ckpt-mib MiB in 4 MiB
writes and syncs it.
"""

import argparse
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
    args = p.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    files = sorted(os.path.join(args.data, n) for n in os.listdir(args.data))
    block = os.urandom(4 << 20)
    for epoch in range(args.epochs):
        order = list(range(len(files)))
        random.Random(epoch).shuffle(order)
        for i in order[rank::world]:
            with open(files[i], "rb") as f:
                while f.read(1 << 20):
                    pass
            time.sleep(args.compute_s)
        if rank == 0:
            path = os.path.join(args.ckpt, f"checkpoint_epoch_{epoch}.pt")
            with open(path, "wb") as f:
                for _ in range(args.ckpt_mib // 4):
                    f.write(block)
                f.flush()
                os.fsync(f.fileno())


if __name__ == "__main__":
    main()
