"""A training job whose data and checkpoints live in a bucket, as boto3
or s3fs makes its requests: it lists its dataset and looks at one sample,
then a PyTorch DataLoader (worker processes, each with a client of its
own) reads the samples each epoch (every other one as two ranged GETs), a
step of emulated compute consumes each batch, and after the last epoch
rank 0 uploads its checkpoint in 5 MiB parts (boto3's `upload_file`,
s3fs's `put_file`), writes a small record and deletes the previous one.

    python3 s3_loader.py --bucket B --prefix P --stage      # make the dataset
    python3 s3_loader.py --bucket B --prefix P [--epochs N --workers W] [--client s3fs]

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


FIVE_MIB = 5 << 20


class Boto3:
    """The job's requests through boto3."""

    def __init__(self, bucket):
        self.bucket, self.s3 = bucket, client()

    def get(self, k, start=None, end=None):
        kw = {} if start is None else {"Range": f"bytes={start}-{end - 1}"}
        return self.s3.get_object(Bucket=self.bucket, Key=k, **kw)["Body"].read()

    def count(self, prefix):
        return self.s3.list_objects_v2(Bucket=self.bucket, Prefix=prefix)["KeyCount"]

    def head(self, k):
        self.s3.head_object(Bucket=self.bucket, Key=k)

    def upload(self, local, k):
        cfg = TransferConfig(
            multipart_threshold=FIVE_MIB, multipart_chunksize=FIVE_MIB, use_threads=False
        )
        self.s3.upload_file(local, self.bucket, k, Config=cfg)

    def put(self, k, body):
        self.s3.put_object(Bucket=self.bucket, Key=k, Body=body)

    def delete(self, k):
        self.s3.delete_object(Bucket=self.bucket, Key=k)


class S3fs:
    """The job's requests through s3fs (aiobotocore over aiohttp), with its
    caches off so that each call is a request."""

    def __init__(self, bucket):
        import s3fs

        self.bucket = bucket
        self.fs = s3fs.S3FileSystem(
            skip_instance_cache=True,
            use_listings_cache=False,
            config_kwargs={
                "s3": {"addressing_style": "path"},
                "retries": {"max_attempts": 1},
                "request_checksum_calculation": "when_required",
                "response_checksum_validation": "when_required",
            },
        )

    def path(self, k):
        return f"{self.bucket}/{k}"

    def get(self, k, start=None, end=None):
        return self.fs.cat_file(self.path(k), start=start, end=end)

    def count(self, prefix):
        return len(self.fs.ls(self.path(prefix), detail=False))

    def head(self, k):
        self.fs.info(self.path(k))

    def upload(self, local, k):
        self.fs.put_file(local, self.path(k), chunksize=FIVE_MIB)

    def put(self, k, body):
        self.fs.pipe_file(self.path(k), body)

    def delete(self, k):
        self.fs.rm_file(self.path(k))


CLIENTS = {"boto3": Boto3, "s3fs": S3fs}


class Samples(Dataset):
    def __init__(self, make, prefix, n):
        self.make, self.prefix, self.n = make, prefix, n
        self.store = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.store is None:
            self.store = self.make()  # one per worker process, as boto3 advises
        k = key(self.prefix, i)
        if i % 2:
            half = SAMPLE_BYTES // 2
            data = b"".join(self.store.get(k, a, a + half) for a in (0, half))
        else:
            data = self.store.get(k)
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
    p.add_argument("--client", choices=sorted(CLIENTS), default="boto3")
    a = p.parse_args()
    if a.stage:
        s3 = client()
        for i in range(a.samples):
            s3.put_object(Bucket=a.bucket, Key=key(a.prefix, i), Body=os.urandom(SAMPLE_BYTES))
        s3.put_object(Bucket=a.bucket, Key=f"{a.prefix}/run/record-old.json", Body=b"{}")
        return
    make = lambda: CLIENTS[a.client](a.bucket)  # noqa: E731
    store = make()
    asked = {"list": 0, "head": 0, "get": 0, "get_bytes": 0}
    listed = store.count(f"{a.prefix}/train/")
    asked["list"] += 1
    assert listed == a.samples, listed
    store.head(key(a.prefix, 0))
    asked["head"] += 1
    loader = DataLoader(
        Samples(make, a.prefix, a.samples),
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
        store.upload(ckpt, f"{a.prefix}/ckpt/model.bin")
    parts = -(-(a.ckpt_mib << 20) // FIVE_MIB)
    record = json.dumps({"epochs": a.epochs}).encode()
    store.put(f"{a.prefix}/run/record.json", record)
    store.delete(f"{a.prefix}/run/record-old.json")
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
