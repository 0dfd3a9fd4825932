"""The client a user would otherwise run for the object-storage bench
line: boto3, one client and one thread per stream, making the same requests
the replay makes with the same concurrency and part size. Prints one JSON
object: seconds (from all threads starting to the last finishing), bytes,
requests, cpu_seconds (this process's CPU time over the same span: the
requests' cost in the client, imports and start-up left out).

    python3 s3_client.py SPEC_JSON

SPEC: endpoint, bucket, mode ("get": a HEAD, then `ops` ranged GETs of
`bs` bytes in order through the object; "put": a multipart upload of
`size` bytes in `part` parts, or one PUT below `threshold`; "head": `ops`
HEADs of the object; "list": `ops` listings of `prefix` with `/` as the
delimiter, every page; "files": `ops` PUTs of `bs` bytes as KEY/f{i}.bin,
then a DELETE of each), keys (one per thread); start_at (optional, Unix
seconds: when the threads begin, so that several processes begin
together; the answer then also has `started` and `ended`, Unix seconds).
"""

import json
import os
import sys
import threading
import time

import boto3
from botocore.config import Config


def main():
    spec = json.loads(sys.argv[1])
    keys = spec["keys"]
    start = threading.Barrier(len(keys) + 1)
    done = [None] * len(keys)
    data = os.urandom(
        max(spec.get("part", 0), spec.get("threshold", 0), spec.get("bs", 0), 1)
    )

    def client():
        return boto3.client(
            "s3",
            endpoint_url=spec["endpoint"],
            config=Config(retries={"max_attempts": 1}, max_pool_connections=1),
        )

    def get(c, key):
        c.head_object(Bucket=spec["bucket"], Key=key)
        n = req = 0
        size, bs = spec["size"], spec["bs"]
        for i in range(spec["ops"]):
            off = (i * bs) % size
            r = c.get_object(
                Bucket=spec["bucket"], Key=key, Range=f"bytes={off}-{off + bs - 1}"
            )
            n += len(r["Body"].read())
            req += 1
        return n, req + 1

    def put(c, key):
        size, part = spec["size"], spec["part"]
        if size < spec["threshold"]:
            c.put_object(Bucket=spec["bucket"], Key=key, Body=data[:size])
            return size, 1
        up = c.create_multipart_upload(Bucket=spec["bucket"], Key=key)
        parts, sent = [], 0
        while sent < size:
            n = min(part, size - sent)
            r = c.upload_part(
                Bucket=spec["bucket"],
                Key=key,
                UploadId=up["UploadId"],
                PartNumber=len(parts) + 1,
                Body=data[:n],
            )
            parts.append({"ETag": r["ETag"], "PartNumber": len(parts) + 1})
            sent += n
        c.complete_multipart_upload(
            Bucket=spec["bucket"],
            Key=key,
            UploadId=up["UploadId"],
            MultipartUpload={"Parts": parts},
        )
        return size, len(parts) + 2

    def head(c, key):
        for _ in range(spec["ops"]):
            c.head_object(Bucket=spec["bucket"], Key=key)
        return 0, spec["ops"]

    def listing(c, key):
        req = 0
        for _ in range(spec["ops"]):
            args = {"Bucket": spec["bucket"], "Prefix": spec["prefix"], "Delimiter": "/"}
            while True:
                r = c.list_objects_v2(**args)
                req += 1
                if not r.get("IsTruncated"):
                    break
                args["ContinuationToken"] = r["NextContinuationToken"]
        return 0, req

    def files(c, key):
        names = [f"{key}/f{i}.bin" for i in range(spec["ops"])]
        for name in names:
            c.put_object(Bucket=spec["bucket"], Key=name, Body=data[: spec["bs"]])
        for name in names:
            c.delete_object(Bucket=spec["bucket"], Key=name)
        return spec["ops"] * spec["bs"], 2 * spec["ops"]

    work = {"get": get, "put": put, "head": head, "list": listing, "files": files}[
        spec["mode"]
    ]

    def begin():
        start.wait()
        if "start_at" in spec:
            time.sleep(max(0.0, spec["start_at"] - time.time()))

    def thread(i):
        c = client()
        begin()
        done[i] = work(c, keys[i])

    threads = [threading.Thread(target=thread, args=(i,)) for i in range(len(keys))]
    for t in threads:
        t.start()
    begin()
    started = time.time()
    t0, cpu0 = time.monotonic(), time.process_time()
    for t in threads:
        t.join()
    took = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    print(
        json.dumps(
            {
                "seconds": took,
                "bytes": sum(d[0] for d in done),
                "requests": sum(d[1] for d in done),
                "cpu_seconds": cpu,
                "started": started,
                "ended": started + took,
            }
        )
    )


if __name__ == "__main__":
    main()
