"""What the tests ask of a real S3 store besides the replay: a bucket made,
an object put that is not the replay's, the objects beneath a prefix, the
multipart uploads left open. Signed
requests through boto3, with the keys given, so they work against a store
that checks signatures (the RADOS Gateway of `rgw.py`).

    python3 s3_admin.py ENDPOINT ACCESS_KEY SECRET_KEY create-bucket BUCKET
    python3 s3_admin.py ENDPOINT ACCESS_KEY SECRET_KEY put BUCKET KEY SIZE
    python3 s3_admin.py ENDPOINT ACCESS_KEY SECRET_KEY objects BUCKET PREFIX
    python3 s3_admin.py ENDPOINT ACCESS_KEY SECRET_KEY uploads BUCKET

`objects` prints a JSON list of [key, size], every page; `uploads` the
number of uploads begun and neither completed nor aborted.
"""

import json
import sys

import boto3
from botocore.config import Config


def main():
    endpoint, key, secret, command, bucket, *rest = sys.argv[1:]
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}),
    )
    if command == "create-bucket":
        s3.create_bucket(Bucket=bucket)
    elif command == "put":
        key, size = rest
        s3.put_object(Bucket=bucket, Key=key, Body=b"\x07" * int(size))
    elif command == "objects":
        out = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=rest[0]):
            out += [[o["Key"], o["Size"]] for o in page.get("Contents", [])]
        print(json.dumps(sorted(out)))
    elif command == "uploads":
        print(len(s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])))
    else:
        sys.exit(f"s3_admin.py: unknown command {command}")


if __name__ == "__main__":
    main()
