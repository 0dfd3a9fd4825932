"""A small distributed training job whose I/O is run at several world sizes,
so a replay of its trace at R ranks can be checked against the job itself
at N ranks.

Launched with `torchrun --standalone --nproc_per_node=N`; gloo on CPU. Each
rank reads its share of the sample files (DistributedSampler) through a
DataLoader with forked worker processes, trains a stack of equal Linear
layers wrapped in DistributedDataParallel, and at the end of every epoch
saves a torch.distributed.checkpoint (DCP: one `__{rank}_0.distcp` shard per
rank plus `.metadata` from the coordinator) and, from rank 0 alone, the
model's weights with torch.save. Checkpoints follow epochs, so the job
saves as often at any world size.

The layers are equal in size so DCP's deduplication, which hands each
replicated tensor to the rank with the least to write so far, gives every
rank an equal share of the state at any world size that divides the
layer count.

On success rank 0 writes a JSON line to --report with what the job did.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class FileSamples(Dataset):
    """One sample per file; the whole file is read on every access."""

    def __init__(self, root, width):
        self.paths = sorted(os.path.join(root, n) for n in os.listdir(root))
        self.width = width

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        with open(self.paths[index], "rb") as f:
            raw = f.read()
        data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).float()
        usable = data[: (data.numel() // self.width) * self.width]
        x = usable.view(-1, self.width).mean(dim=0) / 255.0
        y = x[:8].sum().unsqueeze(0)
        return x, y


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--compute-s", type=float, default=0.01)
    p.add_argument("--report")
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    dataset = FileSamples(args.data, args.width)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(
        dataset,
        batch_size=args.batch,
        sampler=sampler,
        num_workers=2,
        multiprocessing_context="fork",
        persistent_workers=True,
    )

    layers = []
    for _ in range(args.layers):
        layers += [nn.Linear(args.width, args.width), nn.ReLU()]
    model = nn.Sequential(*layers)
    ddp = DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)

    step, saves = 0, []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            loss = ((ddp(x).mean(dim=1, keepdim=True) - y) ** 2).mean()
            loss.backward()
            opt.step()
            time.sleep(args.compute_s)
            step += 1
        state = {"model": model.state_dict(), "optim": opt.state_dict()}
        ckpt_id = os.path.join(args.ckpt, f"epoch_{epoch}")
        dcp.save(state, checkpoint_id=ckpt_id)
        if rank == 0:
            torch.save(model.state_dict(), os.path.join(args.ckpt, f"weights_epoch_{epoch}.pt"))
        saves.append(ckpt_id)
        dist.barrier()

    dist.barrier()
    if rank == 0 and args.report:
        with open(args.report, "w") as f:
            json.dump(
                {
                    "world": world,
                    "files": len(dataset),
                    "epochs": args.epochs,
                    "steps_per_rank": step,
                    "checkpoints": saves,
                },
                f,
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
