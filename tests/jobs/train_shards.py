"""A second real distributed training job, unlike train_ddp.py in the two
things storage sees: the loader and the checkpoint.

- Loader: an IterableDataset that streams large shard files in fixed-size
  chunks, each chunk one sample (as WebDataset-style and record-file loaders
  do), split between ranks and then between the DataLoader's worker
  processes, so every shard is read once per epoch, sequentially.
- Checkpoint: every rank saves its own `torch.save` file (model and optimizer
  state, as sharded trainers do) of a larger model than train_ddp.py's, with
  an fsync, into `--ckpt/step_NNNNN/rank_R.pt`.

Launched with `torchrun --standalone --nproc_per_node=2`; gloo on CPU; a
sleep per step stands in for accelerator compute.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

FEATURES = 256


class ShardChunks(IterableDataset):
    """Chunks of the shard files this rank and worker own, in order."""

    def __init__(self, root, chunk, rank, world):
        self.paths = sorted(os.path.join(root, n) for n in os.listdir(root))
        self.chunk, self.rank, self.world = chunk, rank, world

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        mine = self.paths[self.rank :: self.world][worker::workers]
        for path in mine:
            with open(path, "rb") as f:
                while True:
                    raw = f.read(self.chunk)
                    if len(raw) < FEATURES:
                        break
                    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).float()
                    usable = data[: (data.numel() // FEATURES) * FEATURES]
                    x = usable.view(-1, FEATURES).mean(dim=0) / 255.0
                    yield x, x[:8].sum().unsqueeze(0)


def save(state, path):
    """torch.save to a file that is on disk when this returns."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--chunk", type=int, default=1 << 20, help="bytes per sample read")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--ckpt-every", type=int, default=12)
    p.add_argument("--compute-s", type=float, default=0.1)
    p.add_argument("--hidden", type=int, default=1536)
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    loader = DataLoader(
        ShardChunks(args.data, args.chunk, rank, world),
        batch_size=args.batch,
        num_workers=args.workers,
        multiprocessing_context="fork",
        prefetch_factor=2,
    )
    model = nn.Sequential(
        nn.Linear(FEATURES, args.hidden),
        nn.ReLU(),
        nn.Linear(args.hidden, args.hidden),
        nn.ReLU(),
        nn.Linear(args.hidden, 1),
    )
    ddp = DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()

    step = 0
    for _ in range(args.epochs):
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(ddp(x), y)
            loss.backward()
            opt.step()
            time.sleep(args.compute_s)
            step += 1
            if step % args.ckpt_every == 0:
                state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": step}
                save(state, os.path.join(args.ckpt, f"step_{step:05d}", f"rank_{rank}.pt"))
                dist.barrier()
                time.sleep(args.compute_s)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
