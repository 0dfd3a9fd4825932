"""A training job on the S3 connector for PyTorch (s3torchconnector, on the
AWS Common Runtime's own HTTP client and, over https, its own TLS): a
DataLoader with two worker processes reads every sample beneath a prefix
through `S3MapDataset`, then the job writes a small checkpoint through
`S3Checkpoint` (a multipart upload of one part).

    python3 s3_connector.py --bucket B --prefix P

The endpoint and keys come from the environment (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY). It prints, as one JSON line,
the samples and bytes it read and, where the store refused what the
client wanted, the error: Ceph 16's gateway answers an upload's
completion without the `ETag` header this client expects, so the client
raises after the store has served every request.
"""

import argparse
import json
import os

import torch
from s3torchconnector import S3Checkpoint, S3ClientConfig, S3MapDataset
from torch.utils.data import DataLoader


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", required=True)
    a = p.parse_args()
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    region = os.environ.get("AWS_REGION", "us-east-1")
    config = S3ClientConfig(force_path_style=True, max_attempts=1)
    dataset = S3MapDataset.from_prefix(
        f"s3://{a.bucket}/{a.prefix}/train/",
        region=region,
        endpoint=endpoint,
        s3client_config=config,
        transform=lambda obj: len(obj.read()),
    )
    loader = DataLoader(dataset, batch_size=4, num_workers=2)
    samples = read = 0
    for batch in loader:
        samples += len(batch)
        read += int(batch.sum())
    error = None
    checkpoint = S3Checkpoint(region=region, endpoint=endpoint, s3client_config=config)
    try:
        with checkpoint.writer(f"s3://{a.bucket}/{a.prefix}/ckpt/connector.pt") as w:
            torch.save({"step": samples}, w)
    except Exception as e:  # the gateway's answer, not the job's fault
        error = str(e)
    print(json.dumps({"samples": samples, "bytes": read, "error": error}))


if __name__ == "__main__":
    main()
