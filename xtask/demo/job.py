"""A small training-shaped job for `cargo xtask demo`: two loader worker
processes read dataset shards each step, the main process computes, and every
few steps a checkpoint is written and fsync'd. Plain Python, no framework, so
the demo runs on any machine with python3.

usage: job.py WORKDIR [STEPS] [CKPT_EVERY]
"""

import multiprocessing as mp
import os
import sys
import time

SHARDS = 32
SHARD_BYTES = 1 << 20
READ = 256 << 10
CKPT_BYTES = 16 << 20


def make_dataset(root):
    os.makedirs(root, exist_ok=True)
    for i in range(SHARDS):
        p = os.path.join(root, f"shard-{i:03}.bin")
        if not os.path.exists(p) or os.path.getsize(p) != SHARD_BYTES:
            with open(p, "wb") as f:
                f.write(os.urandom(SHARD_BYTES))


def load(args):
    root, shard = args
    total = 0
    with open(os.path.join(root, f"shard-{shard:03}.bin"), "rb", buffering=0) as f:
        while True:
            b = f.read(READ)
            if not b:
                return total
            total += len(b)


def main():
    work = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    every = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    data, ckpt = os.path.join(work, "data"), os.path.join(work, "ckpt")
    make_dataset(data)
    os.makedirs(ckpt, exist_ok=True)
    blob = os.urandom(CKPT_BYTES)
    with mp.get_context("fork").Pool(2) as pool:
        for step in range(steps):
            shards = [(data, (step * 2 + k) % SHARDS) for k in range(2)]
            pool.map(load, shards)
            time.sleep(0.02)  # the "GPU" step
            if (step + 1) % every == 0:
                p = os.path.join(ckpt, f"step-{step + 1:04}.pt")
                with open(p, "wb") as f:
                    f.write(blob)
                    f.flush()
                    os.fsync(f.fileno())


if __name__ == "__main__":
    main()
