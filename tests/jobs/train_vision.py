"""An image-classification job as users write it with PyTorch Lightning: an
ImageFolder of JPEG files decoded by DataLoader worker processes, a
torchvision ResNet trained on the GPU in bf16 (on the CPU where there is
none), Lightning's ModelCheckpoint saving after every epoch and its CSV
logger keeping a run directory (hparams.yaml, metrics.csv). The training
loop, the checkpoint files and the logs are Lightning's own. With
`--arch small` it needs no torchvision: the folders are read with Pillow
and the model is a small convolutional network, for a machine without a
GPU (the end-to-end tests).

`--make-data DIR --images N` writes the dataset first: N JPEG images of
--size pixels a side in 10 class folders, encoded in parallel.

On success the job writes --report, a JSON document of its own record by
the wall clock in ns: each epoch (the epoch's start to its last step done),
the compute of its steps (each step from its batch handed over to its
optimizer step done, synchronised with the GPU, as MLPerf Storage counts
an accelerator's compute) and each checkpoint (ModelCheckpoint's save, from
its call to the file written). time_fidelity.py reads the same keys.
"""

import argparse
import json
import os
import time
from multiprocessing import Pool


def write_images(job):
    """One worker's share of the dataset: noise with a gradient, as JPEG."""
    import numpy as np
    from PIL import Image

    root, size, first, count = job
    rng = np.random.default_rng(first)
    ramp = np.linspace(0, 160, size, dtype=np.float32)[None, :, None]
    for i in range(first, first + count):
        pixels = (rng.integers(0, 96, (size, size, 3), dtype=np.uint8) + ramp).clip(0, 255)
        folder = os.path.join(root, f"class_{i % 10}")
        Image.fromarray(pixels.astype(np.uint8)).save(os.path.join(folder, f"img_{i:06d}.jpg"), quality=90)


def make_data(root, images, size):
    for c in range(10):
        os.makedirs(os.path.join(root, f"class_{c}"), exist_ok=True)
    workers = os.cpu_count() or 1
    per = -(-images // workers)
    jobs = [(root, size, f, min(per, images - f)) for f in range(0, images, per)]
    with Pool(workers) as pool:
        pool.map(write_images, jobs)


def torchvision_parts(a):
    """torchvision's ImageFolder (random resized crops, flips) and model."""
    import torchvision
    from torchvision import transforms

    shape = transforms.Compose([transforms.RandomResizedCrop(a.crop), transforms.RandomHorizontalFlip(),
                                transforms.ToTensor()])
    return torchvision.datasets.ImageFolder(a.data, transform=shape), getattr(torchvision.models, a.arch)(num_classes=10)


class Folders:
    """The class folders read with Pillow: each sample a random crop of
    `crop` pixels a side, flipped half the time (a map-style dataset)."""

    def __init__(self, root, crop):
        self.crop = crop
        self.samples = [(os.path.join(root, c, n), k)
                        for k, c in enumerate(sorted(os.listdir(root)))
                        for n in sorted(os.listdir(os.path.join(root, c)))]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        import numpy as np
        import torch
        from PIL import Image

        path, label = self.samples[i]
        with Image.open(path) as im:
            pixels = np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0
        h, w, _ = pixels.shape
        y, x = np.random.randint(0, h - self.crop + 1), np.random.randint(0, w - self.crop + 1)
        crop = pixels[y:y + self.crop, x:x + self.crop]
        if np.random.rand() < 0.5:
            crop = crop[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(crop.transpose(2, 0, 1))), label


def small(a):
    """Folders and a small convolutional network: the job without
    torchvision."""
    import torch
    from torch import nn

    net = nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    if a.state_mib:
        # Saved with the layers, never computed on: a large model's
        # checkpoint with a small model's compute.
        net.register_buffer("state", torch.zeros((a.state_mib << 20) // 4))
    return Folders(a.data, a.crop), net


def train(a):
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import Callback, ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger
    from torch.utils.data import DataLoader

    gpu = torch.cuda.is_available()

    class Classifier(L.LightningModule):
        def __init__(self, net, arch, lr):
            super().__init__()
            self.save_hyperparameters("arch", "lr")
            self.net = net
            self.loss = torch.nn.CrossEntropyLoss()

        def training_step(self, batch, _):
            x, y = batch
            loss = self.loss(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)

    class Record(Callback):
        """The job's own clock: epochs, the compute of their steps."""

        def __init__(self):
            self.epochs, self.compute, self.step_start = [], [], None

        def on_train_epoch_start(self, trainer, module):
            self.epochs.append([time.time_ns(), None])
            self.compute.append(0)

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.step_start = time.time_ns()

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            if gpu:
                torch.cuda.synchronize()
            now = time.time_ns()
            self.compute[-1] += now - self.step_start
            self.epochs[-1][1] = now

    class TimedCheckpoint(ModelCheckpoint):
        """ModelCheckpoint, each save's span noted."""

        saves = []

        def _save_checkpoint(self, trainer, filepath):
            started = time.time_ns()
            super()._save_checkpoint(trainer, filepath)
            self.saves.append([started, time.time_ns()])

    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    data, net = (small if a.arch == "small" else torchvision_parts)(a)
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                        persistent_workers=a.workers > 0, pin_memory=gpu, drop_last=True)
    record = Record()
    checkpoints = TimedCheckpoint(dirpath=os.path.join(a.root, "checkpoints"), every_n_epochs=1,
                                  save_top_k=-1, save_last=False)
    trainer = L.Trainer(
        default_root_dir=a.root,
        accelerator="gpu" if gpu else "cpu",
        devices=1,
        precision="bf16-mixed" if gpu else "32-true",
        max_epochs=a.epochs,
        limit_train_batches=a.steps or 1.0,
        logger=CSVLogger(a.root, name="logs"),
        callbacks=[record, checkpoints],
        enable_progress_bar=False,
        log_every_n_steps=10,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    model = Classifier(net, a.arch, a.lr)
    if gpu:
        model = model.to(memory_format=torch.channels_last)
    trainer.fit(model, loader)
    if a.report and trainer.global_rank == 0:
        with open(a.report, "w") as f:
            json.dump({
                "device": torch.cuda.get_device_name() if gpu else "cpu",
                "images": len(data),
                "steps": trainer.global_step,
                "epoch_times_ns": record.epochs,
                "epoch_compute_ns": record.compute,
                "checkpoint_times_ns": TimedCheckpoint.saves,
                "checkpoints": sorted(os.listdir(os.path.join(a.root, "checkpoints"))),
            }, f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True, help="the ImageFolder (class folders of JPEG files)")
    p.add_argument("--make-data", action="store_true", help="write the dataset into --data, then stop")
    p.add_argument("--images", type=int, default=6400)
    p.add_argument("--size", type=int, default=256, help="pixels a side of the written images")
    p.add_argument("--root", help="the run's directory: checkpoints and logs")
    p.add_argument("--arch", default="resnet50", help="a torchvision model, or small (no torchvision)")
    p.add_argument("--crop", type=int, default=224)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=0, help="steps an epoch (0: the whole dataset)")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--state-mib", type=int, default=0, help="small: model state beyond its layers")
    p.add_argument("--threads", type=int, default=0,
                   help="the training process's compute threads (0: PyTorch's default, one a core)")
    p.add_argument("--report")
    a = p.parse_args()
    if a.make_data:
        make_data(a.data, a.images, a.size)
    else:
        if not a.root:
            p.error("--root is needed to train")
        train(a)


if __name__ == "__main__":
    main()
