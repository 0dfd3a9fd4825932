"""An S3 API server for the tests, in a process of its own: moto's server,
with the figures a storage team reads off its gateway's access log. Every
response body's bytes and every request are counted by method (a GET of
the bucket itself counted as LIST), and served as JSON at GET /__served. Faults on demand: --fail-every N answers every
Nth S3 request with 503 SlowDown; GET /__fail?after=N[&method=M] answers
every request (of method M) after the next N so, until GET /__heal.

    python3 s3.py PORT [--fail-every N]
"""

import argparse
import json
import threading
from urllib.parse import parse_qs

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    create_backend_app,
)
from werkzeug.serving import run_simple

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


class Counting:
    def __init__(self, app, fail_every):
        self.app = app
        self.fail_every = fail_every
        self.fail_after = 0
        self.fail_method = None
        self.lock = threading.Lock()
        self.requests = 0
        self.figures = {"requests": {}, "body_bytes": {}, "received_bytes": {}, "slowdowns": 0}

    def add(self, table, method, n):
        with self.lock:
            t = self.figures[table]
            t[method] = t.get(method, 0) + n

    def __call__(self, environ, start_response):
        method = environ["REQUEST_METHOD"]
        # A GET of the bucket itself is a listing.
        if method == "GET" and environ.get("PATH_INFO", "").strip("/").count("/") == 0:
            method = "LIST"
        if environ.get("PATH_INFO") == "/__served":
            with self.lock:
                body = json.dumps(self.figures).encode()
            start_response(
                "200 OK",
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
            )
            return [body]
        if environ.get("PATH_INFO") == "/__fail":
            q = parse_qs(environ.get("QUERY_STRING", ""))
            with self.lock:
                self.fail_after = self.requests + int(q.get("after", ["0"])[0])
                self.fail_method = q.get("method", [None])[0]
            start_response("200 OK", [("Content-Length", "0")])
            return [b""]
        if environ.get("PATH_INFO") == "/__heal":
            with self.lock:
                self.fail_after = 0
            start_response("200 OK", [("Content-Length", "0")])
            return [b""]
        with self.lock:
            self.requests += 1
            n = self.requests
        failing = (self.fail_every and n % self.fail_every == 0) or (
            self.fail_after
            and n > self.fail_after
            and self.fail_method in (None, environ["REQUEST_METHOD"])
        )
        if failing:
            with self.lock:
                self.figures["slowdowns"] += 1
            # The request's body is read, as a server does before answering.
            length = int(environ.get("CONTENT_LENGTH") or 0)
            if length:
                environ["wsgi.input"].read(length)
            start_response(
                "503 Slow Down",
                [("Content-Type", "application/xml"), ("Content-Length", str(len(SLOW_DOWN)))],
            )
            return [SLOW_DOWN]
        self.add("requests", method, 1)
        self.add("received_bytes", method, int(environ.get("CONTENT_LENGTH") or 0))
        result = self.app(environ, start_response)

        def counted():
            try:
                for chunk in result:
                    self.add("body_bytes", method, len(chunk))
                    yield chunk
            finally:
                if hasattr(result, "close"):
                    result.close()

        return counted()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("--fail-every", type=int, default=0)
    a = p.parse_args()
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        "127.0.0.1",
        a.port,
        Counting(app, a.fail_every),
        threaded=True,
    )


if __name__ == "__main__":
    main()
