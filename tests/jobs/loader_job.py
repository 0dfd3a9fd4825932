"""A Python job that does to storage what a training job does, without a
framework's training loop: worker processes (a fork pool, as a DataLoader's
workers) read every file of a dataset each epoch; a scratch file is made
and removed; a checkpoint is saved after each epoch (torch.save when torch
is installed, else pickle) to a temporary name, fsync'd and renamed into
place. It prints `MARK <what> <start|end> <unix seconds>` lines, the truth
that phases and roles are checked against. Under mpirun (or any launcher
that sets a rank), each rank reads its share of the files and saves its own
checkpoint file.

usage: loader_job.py --data DIR --ckpt DIR --scratch DIR [--epochs N] [--workers N]
"""

import argparse
import multiprocessing as mp
import os
import pickle
import tempfile
import time

try:
    import torch
except ImportError:
    torch = None


def mark(what, edge):
    print(f"MARK {what} {edge} {time.time():.6f}", flush=True)


def read_all(path):
    n = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 16)
            if not b:
                return n
            n += len(b)


def save(state, path):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        if torch is not None:
            torch.save(state, f)
        else:
            pickle.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.ckpt, exist_ok=True)
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    paths = [os.path.join(a.data, n) for n in sorted(os.listdir(a.data))][rank::world]
    total = 0
    for epoch in range(a.epochs):
        mark(f"epoch{epoch}", "start")
        with mp.get_context("fork").Pool(a.workers) as pool:
            total += sum(pool.map(read_all, paths, chunksize=4))
        fd, tmp = tempfile.mkstemp(dir=a.scratch)
        os.write(fd, os.urandom(1 << 20))
        os.close(fd)
        os.unlink(tmp)
        mark(f"epoch{epoch}", "end")
        mark(f"checkpoint{epoch}", "start")
        weights = os.urandom(4 << 20)
        state = {"epoch": epoch, "weights": torch.frombuffer(bytearray(weights), dtype=torch.uint8) if torch is not None else weights}
        save(state, os.path.join(a.ckpt, f"epoch_{epoch}_rank_{rank}.pt"))
        mark(f"checkpoint{epoch}", "end")
    print(f"read {total} bytes", flush=True)


if __name__ == "__main__":
    main()
