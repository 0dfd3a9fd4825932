"""A real S3 store for the tests: Ceph's RADOS Gateway on a one-node cluster
(one ceph-mon, one ceph-osd on memstore, one radosgw), all of it under a
scratch directory and on loopback, from Debian's packages, with no systemd.

    python3 rgw.py --dir DIR --port PORT [--no-stdin] [--timeout S]

Prints one JSON line once the gateway answers S3:

    {"endpoint": "http://127.0.0.1:PORT", "access_key": ..., "secret_key": ...,
     "other_access_key": ..., "other_secret_key": ..., "started_s": ...,
     "ops_log": "DIR/log/ops.log",
     "tls_endpoint": "https://127.0.0.1:TLS_PORT", "ca_bundle": "DIR/tls/ca.pem"}

The gateway answers the same S3 over TLS on a second free port, with a
certificate made for 127.0.0.1 and signed by a CA of its own (`ca_bundle`,
which verifies it).

The ops log is the gateway's own record of what it served: a JSON line per
request as it ends (its method and URI, the gateway's name for the
operation, the status, the body bytes sent and received).

The "other" user owns nothing of the first one's, for AccessDenied cases.
It then stays in the foreground until SIGTERM, SIGINT, SIGHUP or the end of
its standard input (so that a test that dies takes the cluster with it;
--no-stdin for a run in the background, where stdin is /dev/null and so at
its end from the start), and kills every daemon it started, whatever
happened. A new cluster each run: what an earlier run left
in DIR is wiped first; nothing outside DIR is written.

Exit codes: 0 after a requested stop, 1 when a daemon failed or the start
timed out (the daemon's log's tail on stderr), 3 when a package is missing.
"""

import argparse
import ctypes
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

USER = {"uid": "iorepro", "access_key": "iorepro", "secret_key": "iorepro-secret"}
OTHER = {
    "uid": "iorepro-other",
    "access_key": "iorepro-other",
    "secret_key": "iorepro-other-secret",
}

# ceph-mgr is not needed: without it the cluster only lacks its statistics
# and dashboards; the gateway, the OSD and the monitor work as usual.
INSTALL = "apt-get install radosgw ceph-mon ceph-osd"
# The programs used, with the Debian package that ships each.
PROGRAMS = {
    "ceph-mon": "ceph-mon",
    "ceph-osd": "ceph-osd",
    "radosgw": "radosgw",
    "radosgw-admin": "ceph-common",
    "ceph": "ceph-common",
    "ceph-authtool": "ceph-common",
    "monmaptool": "ceph-base",
}

# The OSD keeps objects in memory: fast to create and to throw away. This is
# its capacity, taken from RAM only as objects are written.
MEMSTORE_BYTES = 2 << 30

# The daemons' names: $name in ceph.conf.
MON = "mon.a"
OSD = "osd.0"
RGW = "client.rgw.x"

# Every entity's key is made before the monitor exists and handed to its
# mkfs, which imports them all: no `ceph auth` round trips later.
KEYS = {
    "mon.": ["mon", "allow *"],
    "client.admin": ["mon", "allow *", "osd", "allow *", "mgr", "allow *"],
    OSD: ["mon", "allow profile osd", "mgr", "allow profile osd", "osd", "allow *"],
    RGW: ["mon", "allow rw", "osd", "allow rwx", "mgr", "allow rw"],
}

CONF = """\
[global]
fsid = {fsid}
# msgr2 only, on loopback: one port for the monitor, and the OSD's
# replication and heartbeat ports (cluster_addr) on no other interface.
mon_host = [v2:127.0.0.1:{mon_port}]
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_msgr1 = false

# Everything a daemon writes goes under the scratch directory; the defaults
# point into /var/lib/ceph, /var/log/ceph and /var/run/ceph.
keyring = {dir}/keyring
run_dir = {dir}/run
admin_socket = {dir}/run/$name.asok
log_file = {dir}/log/$name.log
mon_cluster_log_file = {dir}/log/cluster.log
crash_dir = {dir}/crash
mon_data = {dir}/mon/$id
osd_data = {dir}/osd/$id
osd_journal = {dir}/osd/$id/journal
rgw_data = {dir}/rgw/$id

# The monitor batches changes for a second before committing them, and the
# gateway's start waits on some twenty changes (its pools and their settings)
# one after another: 11 s to start rather than 1.
paxos_propose_interval = 0.05
# The monitor refuses to start when its disk has under 5% free (a warning
# under 30%), and a large shared disk can have that with gigabytes left:
# here it stores only the cluster's small maps, so only a full disk stops it.
mon_data_avail_crit = 0
mon_data_avail_warn = 1

# A client gives up on an unreachable monitor soon, not after 5 minutes.
client_mount_timeout = 30

# One OSD: pools of one copy, without the warnings and refusals meant for
# real clusters. 8 placement groups a pool rather than 32: each costs the OSD
# memory and threads' work, and the gateway makes seven pools.
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off

osd_objectstore = memstore
memstore_device_bytes = {memstore_bytes}
# Deleted and overwritten objects' data is reclaimed in seconds rather than
# hours, so that memory use follows what the tests keep.
rgw_gc_obj_min_wait = 30
rgw_gc_processor_period = 30

[{rgw}]
# Without tcp_nodelay a small answer waits on Nagle's algorithm for the
# client's delayed ACK: about 40 ms a small GET, whatever the client.
rgw_frontends = beast endpoint=127.0.0.1:{port} ssl_endpoint=127.0.0.1:{tls_port} ssl_certificate={cert} ssl_private_key={key} tcp_nodelay=1
# 512 threads by default, for a server's load; this runs beside the tests.
rgw_thread_pool_size = 64

# What the gateway served, request by request, in its own words: one JSON
# line per request (method, operation, status, body bytes sent and
# received), written as each request ends, so that a test can hold the
# replay's report against it (RgwStore::served). To a file rather than into
# the cluster's own pool, and with requests to buckets that do not exist.
rgw_enable_ops_log = true
rgw_ops_log_rados = false
rgw_ops_log_file_path = {ops_log}
rgw_log_nonexistent_bucket = true
"""


class Failure(Exception):
    """Starting or running the cluster failed; the message says what."""


class Stop(Exception):
    """A stop was asked for: a signal, or the end of standard input."""


# The signal that asked for a stop. The handler only notes it; the waits all
# poll check(), which raises Stop: no exception lands in the middle of
# starting a process, where the process would escape being tracked.
stop_signal = None


def on_signal(signum, frame):
    global stop_signal
    stop_signal = signal.Signals(signum).name


def child_setup():
    """In a child between fork and exec: dies with this script, even when
    this script is killed by SIGKILL and its cleanup never runs."""
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def ended(returncode):
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with status {returncode}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path, lines=25):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class Cluster:
    def __init__(self, dir, port, deadline, watch_stdin):
        self.dir = os.path.abspath(dir)
        self.port = port
        self.deadline = deadline
        self.watch_stdin = watch_stdin
        self.conf = os.path.join(self.dir, "ceph.conf")
        self.ops_log = os.path.join(self.dir, "log", "ops.log")
        self.daemons = []  # (name, Popen, its stdout's file)
        self.env = dict(os.environ, CEPH_CONF=self.conf)

    # Watching

    def check(self, doing):
        """Raises when a wait should end: a stop was asked for, a daemon
        died, or the time to start is up."""
        if stop_signal:
            raise Stop(stop_signal)
        if self.watch_stdin:
            if sys.stdin is None:
                raise Stop("no standard input (--no-stdin to run without)")
            if select.select([sys.stdin], [], [], 0)[0] and not os.read(sys.stdin.fileno(), 4096):
                raise Stop("standard input closed")
        for name, proc, _ in self.daemons:
            if proc.poll() is not None:
                raise Failure(
                    f"{name} {ended(proc.returncode)} while {doing}\n"
                    + self.logs(name)
                )
        if self.deadline and time.monotonic() > self.deadline:
            raise Failure(
                f"timed out {doing}\n"
                + "\n".join(self.logs(name) for name, _, _ in self.daemons)
            )

    def log(self, name):
        return os.path.join(self.dir, "log", name + ".log")

    def logs(self, name):
        """The tails of a daemon's log and of its own output."""
        out = []
        for path in (self.log(name), self.log(name) + ".out"):
            text = tail(path)
            if text:
                out.append(f"--- tail of {path}\n{text}")
        return "\n".join(out) or f"--- {name} wrote no log"

    # Processes

    def popen(self, argv, **kw):
        # Each in a process group of its own, so that a kill reaches
        # whatever it forked too.
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,
            preexec_fn=child_setup,
            **kw,
        )

    def spawn(self, name, argv):
        """Starts a daemon, in the foreground (-f) so that it stays this
        script's child."""
        out = open(self.log(name) + ".out", "wb")
        try:
            proc = self.popen(argv + ["-f", "-c", self.conf], stdout=out, stderr=subprocess.STDOUT)
        except BaseException:
            out.close()
            raise
        self.daemons.append((name, proc, out))

    def tool(self, argv, doing, timeout=60):
        """Runs a command-line tool to its end; its output."""
        return self.tools([argv], doing, timeout)[0]

    def tools(self, argvs, doing, timeout=60):
        """Runs command-line tools side by side to their end, watching the
        daemons meanwhile; their outputs, or Failure with the stderr of the
        first that failed."""
        procs = []
        outs = []
        until = time.monotonic() + timeout
        try:
            for argv in argvs:
                procs.append(self.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
            for argv, proc in zip(argvs, procs):
                while True:
                    try:
                        out, err = proc.communicate(timeout=0.1)
                        break
                    except subprocess.TimeoutExpired:
                        self.check(doing)
                        if time.monotonic() > until:
                            raise Failure(f"{doing}: `{' '.join(argv)}` took over {timeout} s")
                if proc.returncode != 0:
                    raise Failure(
                        f"{doing}: `{' '.join(argv)}` {ended(proc.returncode)}\n"
                        + "\n".join(err.decode(errors="replace").splitlines()[-25:])
                    )
                outs.append(out.decode())
        finally:
            for proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        return outs

    def stop(self):
        """Kills every daemon. SIGKILL at once: the cluster is thrown away,
        and a memstore OSD stopped politely would first write all its objects
        to disk."""
        for _, proc, _ in self.daemons:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for _, proc, out in self.daemons:
            proc.wait()
            out.close()
        self.daemons = []

    # Starting, step by step

    def prepare(self):
        """A fresh layout, config and keys."""
        # Another server on the port could answer in the gateway's place.
        # SO_REUSEADDR as the gateway binds: the connections of a run just
        # ended on this port (TIME_WAIT) do not keep it from binding.
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", self.port))
            except OSError as e:
                raise Failure(f"port {self.port} on 127.0.0.1 is taken: {e}")
        for sub in ("mon", "osd", "rgw", "run", "log", "crash", "tls"):
            shutil.rmtree(os.path.join(self.dir, sub), ignore_errors=True)
            os.makedirs(os.path.join(self.dir, sub))
        for f in ("ceph.conf", "keyring", "monmap"):
            try:
                os.unlink(os.path.join(self.dir, f))
            except FileNotFoundError:
                pass
        self.mon_port = free_port()
        self.tls_port = free_port()
        # A CA of the test's own and a server certificate it signs, as a
        # cluster's gateway has them: clients that check that a CA is not
        # the server's own certificate (rustls, webpki) accept it too.
        tls = os.path.join(self.dir, "tls")
        self.ca = os.path.join(tls, "ca.pem")
        self.cert = os.path.join(tls, "cert.pem")
        key = os.path.join(tls, "key.pem")
        with open(os.path.join(tls, "server.ext"), "w") as f:
            f.write(
                "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\n"
                "extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n"
            )
        for args in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", "/CN=iorepro test CA", "-keyout", os.path.join(tls, "ca.key"),
             "-out", self.ca],
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", key, "-out", os.path.join(tls, "server.csr")],
            ["x509", "-req", "-in", os.path.join(tls, "server.csr"), "-CA", self.ca,
             "-CAkey", os.path.join(tls, "ca.key"), "-CAcreateserial", "-days", "2",
             "-extfile", os.path.join(tls, "server.ext"), "-out", self.cert],
        ):
            self.tool(["openssl"] + args, "making the TLS certificates")
        self.fsid = str(uuid.uuid4())
        with open(self.conf, "w") as f:
            f.write(
                CONF.format(
                    fsid=self.fsid,
                    mon_port=self.mon_port,
                    dir=self.dir,
                    port=self.port,
                    rgw=RGW,
                    memstore_bytes=MEMSTORE_BYTES,
                    ops_log=self.ops_log,
                    tls_port=self.tls_port,
                    cert=self.cert,
                    key=key,
                )
            )
        keyring = os.path.join(self.dir, "keyring")
        for i, (entity, caps) in enumerate(KEYS.items()):
            argv = ["ceph-authtool", keyring, "--gen-key", "-n", entity]
            if i == 0:
                argv.append("--create-keyring")
            for j in range(0, len(caps), 2):
                argv += ["--cap", caps[j], caps[j + 1]]
            self.tool(argv, "making the keyring")
        os.chmod(keyring, 0o600)

    def start_mon(self):
        monmap = os.path.join(self.dir, "monmap")
        self.tool(
            ["monmaptool", "--create", "--fsid", self.fsid,
             "--addv", "a", f"[v2:127.0.0.1:{self.mon_port}]", monmap],
            "making the monitor map",
        )
        self.tool(
            ["ceph-mon", "-c", self.conf, "--mkfs", "-i", "a",
             "--monmap", monmap, "--keyring", os.path.join(self.dir, "keyring")],
            "making the monitor's store",
        )
        self.spawn(MON, ["ceph-mon", "-i", "a"])

    def start_osd(self):
        # Registering the OSD is also the wait for the monitor to answer.
        osd_uuid = str(uuid.uuid4())
        osd_id = self.tool(
            ["ceph", "-c", self.conf, "osd", "new", osd_uuid],
            "waiting for ceph-mon to register the OSD",
        ).strip()
        if osd_id != "0":
            raise Failure(f"`ceph osd new` gave the OSD id {osd_id!r}, not 0")
        # memstore's mkfs writes into the OSD's directory but does not make it.
        os.makedirs(os.path.join(self.dir, "osd", "0"))
        self.tool(
            ["ceph-osd", "-c", self.conf, "-i", "0", "--mkfs", "--osd-uuid", osd_uuid],
            "making the OSD's store",
        )
        self.spawn(OSD, ["ceph-osd", "-i", "0"])

    def start_rgw(self):
        # The gateway makes its pools and its default zone itself, and waits
        # for the OSD to come up: no separate wait for the OSD.
        self.spawn(RGW, ["radosgw", "-n", RGW])
        url = f"http://127.0.0.1:{self.port}/"
        while True:
            self.check(f"waiting for radosgw to answer S3 on {url}")
            try:
                with urllib.request.urlopen(url, timeout=1) as r:
                    body = r.read()
            except urllib.error.HTTPError as e:
                body = e.read()
            except OSError:
                time.sleep(0.1)
                continue
            # An anonymous GET / is answered with a bucket listing or an S3
            # error, in XML.
            if body.lstrip().startswith(b"<?xml"):
                return
            raise Failure(f"{url} answered, but not as S3: {body[:200]!r}\n" + self.logs(RGW))

    def create_users(self):
        # Both at once: each radosgw-admin run spends most of its time
        # connecting.
        self.tools(
            [
                ["radosgw-admin", "-c", self.conf, "user", "create",
                 "--uid", user["uid"], "--display-name", user["uid"],
                 "--access-key", user["access_key"], "--secret", user["secret_key"]]
                for user in (USER, OTHER)
            ],
            "creating the S3 users",
        )

    def serve(self):
        """Until a stop is asked for; Failure if a daemon dies meanwhile."""
        self.deadline = None
        while True:
            self.check("serving")
            time.sleep(0.2)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True, help="scratch directory, made if missing")
    p.add_argument("--port", type=int, required=True, help="the S3 port on 127.0.0.1")
    p.add_argument("--timeout", type=float, default=180, help="seconds allowed to start")
    p.add_argument("--no-stdin", action="store_true", help="do not stop when stdin closes")
    a = p.parse_args()
    started = time.monotonic()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    missing = [
        f"{prog} (package {pkg})" for prog, pkg in PROGRAMS.items() if not shutil.which(prog)
    ]
    if missing:
        print(f"rgw.py: missing {', '.join(missing)}; install with: {INSTALL}", file=sys.stderr)
        return 3

    os.makedirs(a.dir, exist_ok=True)
    cluster = Cluster(a.dir, a.port, started + a.timeout, watch_stdin=not a.no_stdin)
    try:
        cluster.prepare()
        cluster.start_mon()
        cluster.start_osd()
        cluster.start_rgw()
        cluster.create_users()
        line = json.dumps(
            {
                "endpoint": f"http://127.0.0.1:{a.port}",
                "access_key": USER["access_key"],
                "secret_key": USER["secret_key"],
                "other_access_key": OTHER["access_key"],
                "other_secret_key": OTHER["secret_key"],
                "started_s": round(time.monotonic() - started, 2),
                "ops_log": cluster.ops_log,
                "tls_endpoint": f"https://127.0.0.1:{cluster.tls_port}",
                "ca_bundle": cluster.ca,
            }
        )
        try:
            print(line, flush=True)
        except BrokenPipeError:
            # Quiets Python's own flush of stdout at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise Stop("standard output closed")
        cluster.serve()
    except Stop as e:
        print(f"rgw.py: stopping: {e}", file=sys.stderr)
        return 0
    except Failure as e:
        print(f"rgw.py: {e}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
