"""A job that makes small GETs as fast as it can: THREADS threads, each
with a boto3 client of its own, GETs one 4 KiB object N/THREADS times. The
request-capture bench runs it bare and under the collector.

    python3 small_gets.py BUCKET N THREADS [--put]

Endpoint and keys from the environment. Prints one JSON line: the GETs, the
seconds they took (after one warm-up GET a client), and the rate.
"""

import json
import sys
import threading
import time

import boto3
from botocore.config import Config


def client():
    return boto3.client(
        "s3", config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"})
    )


def main():
    bucket, n, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if "--put" in sys.argv[4:]:
        client().put_object(Bucket=bucket, Key="small", Body=b"x" * 4096)
        return
    clients = [client() for _ in range(threads)]
    for c in clients:
        c.get_object(Bucket=bucket, Key="small")["Body"].read()

    def work(c, k):
        for _ in range(k):
            c.get_object(Bucket=bucket, Key="small")["Body"].read()

    started = time.perf_counter()
    workers = [threading.Thread(target=work, args=(c, n // threads)) for c in clients]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    took = time.perf_counter() - started
    gets = n // threads * threads
    print(json.dumps({"gets": gets, "s": took, "per_s": gets / took}), flush=True)


if __name__ == "__main__":
    main()
