"""A small but real distributed training job, used as the workload whose file
I/O the end-to-end tests capture.

Launched with `torchrun --standalone --nproc_per_node=2`, or by `mpirun` or
`srun` (their rank variables are turned into torchrun's); gloo on CPU. Each
rank reads its share of the sample files through a DataLoader with forked
worker processes (a Dataset whose __getitem__ opens and reads one file; with
--evict the file then leaves the page cache, as a dataset larger than memory
would), trains
a small MLP wrapped in DistributedDataParallel, and saves a
torch.distributed.checkpoint (DCP) every --ckpt-every steps (0: at the end
of every epoch). A short sleep per
step stands in for accelerator compute, so reading is paced the way a real
job's is and checkpoints stand apart from the reading around them.

With --resume the job first restores the newest checkpoint (dcp.load), as a
job restarted after preemption does.

On success rank 0 writes a JSON line to --report with what the job did (files,
epochs, checkpoints saved) and when, by the wall clock in ns: each epoch
(rank 0's first batch asked for to its last step done) and each checkpoint
(every rank at the save, after a barrier, to every rank done with it, after
another), which the tests compare with the trace and its phases. With
--rank0-save, rank 0 also writes the model with torch.save in each
checkpoint, as many jobs do beside their sharded state.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

from run_record import RunRecord, as_torchrun

FEATURES = 256


class FileSamples(Dataset):
    """One sample per file; the whole file is read on every access."""

    def __init__(self, root, evict=False):
        self.paths = sorted(os.path.join(root, n) for n in os.listdir(root))
        self.evict = evict

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        with open(self.paths[index], "rb") as f:
            raw = f.read()
            if self.evict:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        # Fold the file's head into a fixed-size feature vector (the whole
        # file is read; decoding little of it keeps the loader's CPU time
        # small, as a GPU job's is against its storage); the label is a
        # cheap function of the content so the model has something to fit.
        head = raw[: FEATURES * 64]
        data = torch.frombuffer(bytearray(head), dtype=torch.uint8).float()
        usable = data[: (data.numel() // FEATURES) * FEATURES]
        x = usable.view(-1, FEATURES).mean(dim=0) / 255.0
        y = x[:8].sum().unsqueeze(0)
        return x, y


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--prefetch", type=int, default=4, help="batches each worker loads ahead")
    p.add_argument("--ckpt-every", type=int, default=10, help="steps between saves; 0: at each epoch's end")
    p.add_argument("--compute-s", type=float, default=0.15)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--state-mib", type=int, default=0,
                   help="model state beyond the layers (a buffer saved with them, never computed "
                        "on): a checkpoint of a large model's size with a small model's compute")
    p.add_argument("--cpu-threads", type=int, default=0,
                   help="torch's threads a process (0: its default); 1 keeps several ranks on a "
                        "few cores from taking each other's, as ranks with a GPU each do not")
    p.add_argument("--evict", action="store_true", help="drop each file from the page cache after reading it")
    p.add_argument("--workers-each-epoch", action="store_true",
                   help="the DataLoader forks its workers at each epoch's start (persistent_workers=False)")
    p.add_argument("--resume", action="store_true", help="first load the newest checkpoint in --ckpt")
    p.add_argument("--rank0-save", action="store_true", help="rank 0 also torch.saves the model at each checkpoint")
    p.add_argument("--out", help="a Hydra-style run directory and log")
    p.add_argument("--report")
    args = p.parse_args()

    as_torchrun()
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    record = RunRecord(args.out, rank, vars(args))
    torch.manual_seed(0)

    dataset = FileSamples(args.data, args.evict)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(
        dataset,
        batch_size=args.batch,
        sampler=sampler,
        num_workers=2,
        multiprocessing_context="fork",
        persistent_workers=not args.workers_each_epoch,
        prefetch_factor=args.prefetch,
    )

    model = nn.Sequential(
        nn.Linear(FEATURES, args.hidden),
        nn.ReLU(),
        nn.Linear(args.hidden, args.hidden),
        nn.ReLU(),
        nn.Linear(args.hidden, 1),
    )
    if args.state_mib:
        model.register_buffer("state", torch.zeros((args.state_mib << 20) // 4))
    # Buffers are not synchronised each step: the state buffer stays the
    # same on every rank, and broadcasting it would be compute of its own.
    ddp = DistributedDataParallel(model, broadcast_buffers=not args.state_mib)
    # The gradients' all-reduce, timed from when the step's first bucket is
    # handed to it to when its last completes: the training loop waits there
    # for a rank whose batch came late, and that wait is the data stall too
    # (MLPerf Storage counts only the accelerator's compute as compute).
    # The buckets' all-reduces overlap one another, so the step's wait is
    # that window, not their sum.
    allreduce_window = [None, 0]

    def timed_allreduce(group, bucket):
        handed = time.time_ns()
        if allreduce_window[0] is None:
            allreduce_window[0] = handed

        def done(fut):
            allreduce_window[1] = max(allreduce_window[1], time.time_ns())
            return fut.value()

        return default_hooks.allreduce_hook(group, bucket).then(done)

    def allreduce_wait_ns():
        """The last step's all-reduce window, and the window cleared."""
        first, last = allreduce_window
        allreduce_window[:] = [None, 0]
        return 0 if first is None else max(0, last - first)

    ddp.register_comm_hook(dist.group.WORLD, timed_allreduce)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()

    step, saves, epoch_times, epoch_compute, checkpoint_times = 0, [], [], [], []
    if args.resume:
        # Restart from the newest checkpoint, as a preempted job does.
        newest = max(d for d in os.listdir(args.ckpt) if d.startswith("step_"))
        state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": 0}
        dcp.load(state, checkpoint_id=os.path.join(args.ckpt, newest))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        step = state["step"]

    def save(name):
        state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": step}
        ckpt_id = os.path.join(args.ckpt, name)
        dist.barrier()
        ckpt_start = time.time_ns()
        dcp.save(state, checkpoint_id=ckpt_id)
        if rank == 0 and args.rank0_save:
            torch.save(model.state_dict(), os.path.join(args.ckpt, f"model_{name}.pt"))
        saves.append(ckpt_id)
        record.note("saved %s", ckpt_id)
        dist.barrier()
        checkpoint_times.append([ckpt_start, time.time_ns()])
        # Compute resumes after the checkpoint, as in a real job.
        time.sleep(args.compute_s)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        epoch_start = time.time_ns()
        # The time the training loop waits for its next batch is the data
        # stall; the rest of the epoch is compute (AU: compute over the
        # epoch's time, as MLPerf Storage counts it).
        waited_ns, asked = 0, time.time_ns()
        for x, y in loader:
            waited_ns += time.time_ns() - asked
            opt.zero_grad()
            loss = loss_fn(ddp(x), y)
            loss.backward()
            waited_ns += allreduce_wait_ns()
            opt.step()
            time.sleep(args.compute_s)
            step += 1
            if args.ckpt_every and step % args.ckpt_every == 0:
                save(f"step_{step:05d}")
            asked = time.time_ns()
        # The epoch is its steps; an end-of-epoch save is timed on its own.
        epoch_end = time.time_ns()
        epoch_times.append([epoch_start, epoch_end])
        # Every rank's wait, averaged (AU is the mean over the ranks).
        waits = torch.tensor([float(waited_ns)], dtype=torch.float64)
        dist.all_reduce(waits)
        epoch_compute.append(epoch_end - epoch_start - int(waits.item() / world))
        record.epoch(epoch, epoch_start, time.time_ns(), len(sampler))
        if not args.ckpt_every:
            save(f"epoch_{epoch}")

    dist.barrier()
    record.finish({"world": world, "files": len(dataset), "checkpoints": saves})
    if rank == 0 and args.report:
        with open(args.report, "w") as f:
            json.dump(
                {
                    "world": world,
                    "files": len(dataset),
                    "epochs": args.epochs,
                    "steps_per_rank": step,
                    "checkpoints": saves,
                    "epoch_times_ns": epoch_times,
                    "epoch_compute_ns": epoch_compute,
                    "checkpoint_times_ns": checkpoint_times,
                },
                f,
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
