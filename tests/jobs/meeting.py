"""The collective a data-parallel job's ranks meet at: every rank waits
until all have arrived, as DLIO's ranks do at an MPI barrier around each
checkpoint. Over TCP on this host (rank 0 gathers one byte from each rank,
then releases them all), so meeting makes no file calls that a capture
would mix with the job's I/O, and needs no MPI bindings for Python.
"""

import socket
import time


class Meeting:
    """Built by every rank at start-up (which is itself a meeting: rank 0
    waits for all to connect). With `port` 0 or a world of one, meeting
    returns at once."""

    def __init__(self, port, rank, world, connect_s=60.0):
        self.peers = []
        self.sock = None
        if not port or world <= 1:
            return
        if rank == 0:
            server = socket.create_server(("127.0.0.1", port))
            server.settimeout(connect_s)
            try:
                for _ in range(world - 1):
                    peer, _ = server.accept()
                    peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    self.peers.append(peer)
            finally:
                server.close()
            return
        deadline = time.monotonic() + connect_s
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port))
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def __call__(self):
        """Returns once every rank has called it as often."""
        if self.sock is not None:
            self.sock.sendall(b"a")
            if not self.sock.recv(1):
                raise ConnectionError("rank 0 left the meeting")
            return
        for peer in self.peers:
            if not peer.recv(1):
                raise ConnectionError("a rank left the meeting")
        for peer in self.peers:
            peer.sendall(b"g")


def free_port():
    """A TCP port on this host that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
