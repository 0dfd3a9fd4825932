"""A training job whose data and checkpoints live in a bucket, as boto3
makes its requests: it lists its dataset and looks at one sample, then a
PyTorch DataLoader (worker processes, each with a client of its own) reads
the samples each epoch (every other one as two ranged GETs), a step of
emulated compute consumes each batch, and after the last epoch rank 0
uploads its checkpoint with `upload_file` (multipart above the threshold),
writes a small record with `put_object` and deletes the previous one.

    python3 s3_loader.py --bucket B --prefix P --stage      # make the dataset
    python3 s3_loader.py --bucket B --prefix P [--epochs N --workers W]

The endpoint and keys come from the environment (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, and AWS_CA_BUNDLE for a store
whose certificate is its own). At the end it prints, as one
JSON line, what it asked of the store.
"""

import argparse
import json
import os
import tempfile
import time

import boto3
import torch
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from torch.utils.data import DataLoader, Dataset

SAMPLE_BYTES = 256 << 10


def client():
    return boto3.client(
        "s3",
        # Checksums only where an API requires them: over https, boto3 would
        # otherwise stream uploads with a trailing checksum, which the
        # gateway of the tests (Ceph 16) refuses.
        config=Config(
            retries={"max_attempts": 1},
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )


def key(prefix, i):
    return f"{prefix}/train/sample-{i:03}.bin"


class Samples(Dataset):
    def __init__(self, bucket, prefix, n):
        self.bucket, self.prefix, self.n = bucket, prefix, n
        self.s3 = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.s3 is None:
            self.s3 = client()  # one per worker process, as boto3 advises
        k = key(self.prefix, i)
        if i % 2:
            half = SAMPLE_BYTES // 2
            parts = [
                self.s3.get_object(Bucket=self.bucket, Key=k, Range=f"bytes={a}-{a + half - 1}")[
                    "Body"
                ].read()
                for a in (0, half)
            ]
            data = b"".join(parts)
        else:
            data = self.s3.get_object(Bucket=self.bucket, Key=k)["Body"].read()
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)[:1024].clone()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--ckpt-mib", type=int, default=12)
    p.add_argument("--stage", action="store_true")
    a = p.parse_args()
    s3 = client()
    if a.stage:
        for i in range(a.samples):
            s3.put_object(Bucket=a.bucket, Key=key(a.prefix, i), Body=os.urandom(SAMPLE_BYTES))
        s3.put_object(Bucket=a.bucket, Key=f"{a.prefix}/run/record-old.json", Body=b"{}")
        return
    asked = {"list": 0, "head": 0, "get": 0, "get_bytes": 0}
    listed = s3.list_objects_v2(Bucket=a.bucket, Prefix=f"{a.prefix}/train/")
    asked["list"] += 1
    assert listed["KeyCount"] == a.samples, listed["KeyCount"]
    s3.head_object(Bucket=a.bucket, Key=key(a.prefix, 0))
    asked["head"] += 1
    loader = DataLoader(
        Samples(a.bucket, a.prefix, a.samples),
        batch_size=a.batch,
        num_workers=a.workers,
        shuffle=False,
    )
    model = torch.nn.Linear(1024, 16)
    for _ in range(a.epochs):
        for batch in loader:
            model(batch.float()).sum().backward()
            time.sleep(0.01)
    odd = a.samples // 2
    asked["get"] = a.epochs * (a.samples + odd)
    asked["get_bytes"] = a.epochs * a.samples * SAMPLE_BYTES
    with tempfile.TemporaryDirectory() as d:
        ckpt = os.path.join(d, "model.bin")
        with open(ckpt, "wb") as f:
            f.write(os.urandom(a.ckpt_mib << 20))
        five = 5 << 20
        s3.upload_file(
            ckpt,
            a.bucket,
            f"{a.prefix}/ckpt/model.bin",
            Config=TransferConfig(multipart_threshold=five, multipart_chunksize=five, use_threads=False),
        )
    parts = -(-(a.ckpt_mib << 20) // five)
    record = json.dumps({"epochs": a.epochs}).encode()
    s3.put_object(Bucket=a.bucket, Key=f"{a.prefix}/run/record.json", Body=record)
    s3.delete_object(Bucket=a.bucket, Key=f"{a.prefix}/run/record-old.json")
    asked.update(
        parts=parts,
        part_bytes=a.ckpt_mib << 20,
        put=1,
        put_bytes=len(record),
        delete=1,
        workers=a.workers,
    )
    print(json.dumps(asked), flush=True)


if __name__ == "__main__":
    main()
