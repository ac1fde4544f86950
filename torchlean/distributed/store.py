"""A key-value store over TCP: the rendezvous of a job launched without MPI (torchrun's and
SLURM's variables), served by rank 0 at MASTER_ADDR:MASTER_PORT.

Every rank (rank 0 too) holds one connection to the server. set(key, value, reads) stores bytes
that are dropped after `reads` gets; get(keys) answers once every key is there. A rank that
closes its connection without saying goodbye (it died) or that left while a key the others wait
for is still missing makes every such wait fail at once with a DistributedError naming the
rank; a rank that stops answering makes them fail at the deadline instead. Rank 0's process
keeps serving at exit until every other rank has left, so a rank that finishes first never cuts
the others off.
"""
from __future__ import annotations

import atexit
import socket
import struct
import threading
import time

from torchlean.distributed.errors import DistributedError

_HELLO, _SET, _GET, _BYE = b"H", b"S", b"G", b"Q"
_OK, _FAIL = 0, 1
CONNECT_RETRY_S = 0.05


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("connection closed")
        got += k
    return bytes(buf)


def _frame(*parts: bytes) -> bytes:
    return b"".join(struct.pack("!Q", len(p)) + p for p in parts)


def _read_parts(sock, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        (n,) = struct.unpack("!Q", _recv_exact(sock, 8))
        out.append(_recv_exact(sock, n))
    return out


class StoreServer:
    """Rank 0's server thread: the keys, who is connected, who left and how."""

    def __init__(self, host: str, port: int, world: int):
        self.world = world
        self.data: dict[bytes, list] = {}        # key -> [value, reads left]
        self.cond = threading.Condition()
        self.joined: set[int] = set()
        self.left: dict[int, str] = {}           # rank -> "left" | "died"
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
        except OSError as e:
            raise DistributedError(f"rank 0: the rendezvous cannot listen on {host}:{port} "
                                   f"({e}); set MASTER_PORT to a free port") from None
        self.sock.listen(max(world, 8))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="torchlean store").start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="torchlean store client").start()

    def _serve(self, conn: socket.socket) -> None:
        rank, how = None, "died"
        try:
            op = _recv_exact(conn, 1)
            if op != _HELLO:
                return
            rank = struct.unpack("!q", _recv_exact(conn, 8))[0]
            with self.cond:
                self.joined.add(rank)
                self.cond.notify_all()
            while True:
                op = _recv_exact(conn, 1)
                if op == _SET:
                    key, value, reads = _read_parts(conn, 3)
                    with self.cond:
                        self.data[key] = [value, int(reads)]
                        self.cond.notify_all()
                elif op == _GET:
                    (n,) = struct.unpack("!Q", _recv_exact(conn, 8))
                    keys = _read_parts(conn, n)
                    conn.sendall(self._get(keys))
                elif op == _BYE:
                    how = "left"
                    conn.sendall(bytes([_OK]))
                    return
                else:
                    return
        except (ConnectionError, OSError, struct.error):
            pass
        finally:
            conn.close()
            if rank is not None:
                with self.cond:
                    self.left.setdefault(rank, how)
                    self.cond.notify_all()

    def _get(self, keys: list[bytes]) -> bytes:
        with self.cond:
            while True:
                missing = [k for k in keys if k not in self.data]
                if not missing:
                    break
                if self.left:
                    who = ", ".join(f"rank {r} {'died' if h == 'died' else 'left the job'}"
                                    for r, h in sorted(self.left.items()))
                    msg = (f"{who} before this collective completed (waiting for "
                           f"{missing[0].decode(errors='replace')!r})").encode()
                    return bytes([_FAIL]) + _frame(msg)
                self.cond.wait()
            values = []
            for k in keys:
                slot = self.data[k]
                values.append(slot[0])
                slot[1] -= 1
                if slot[1] == 0:
                    del self.data[k]
        return bytes([_OK]) + _frame(*values)

    def wait_all_left(self, timeout_s: float) -> None:
        """Rank 0 at exit: serve until every other rank has closed its connection."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while not set(range(1, self.world)) <= set(self.left):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(min(left, 0.5))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class StoreClient:
    """One rank's connection (rank 0 also starts the server)."""

    def __init__(self, host: str, port: int, rank: int, world: int, timeout_s: float):
        self.rank, self.world, self.timeout_s = rank, world, timeout_s
        self.server = StoreServer(host, port, world) if rank == 0 else None
        self.lock = threading.Lock()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.sock = socket.create_connection((host, port), timeout=timeout_s)
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    raise DistributedError(
                        f"rank {rank}: cannot reach the rendezvous at {host}:{port} within "
                        f"{timeout_s:g} s ({e}): is rank 0 running, and are MASTER_ADDR and "
                        "MASTER_PORT the same on every rank?") from None
                time.sleep(CONNECT_RETRY_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(_HELLO + struct.pack("!q", rank))
        self.closed = False
        atexit.register(self.close)

    def set(self, key: str, value: bytes, reads: int) -> None:
        with self.lock:
            self._send(_SET + _frame(key.encode(), bytes(value), str(reads).encode()), key)

    def get(self, keys: list[str], what: str, timeout_s: float | None = None) -> list[bytes]:
        """The values of keys, once all are set; past the deadline a DistributedError."""
        t = self.timeout_s if timeout_s is None else timeout_s
        with self.lock:
            self._send(_GET + struct.pack("!Q", len(keys)) + _frame(*(k.encode() for k in keys)),
                       what)
            try:
                self.sock.settimeout(t)
                status = _recv_exact(self.sock, 1)[0]
                parts = _read_parts(self.sock, len(keys) if status == _OK else 1)
            except socket.timeout:
                self._broken()
                raise DistributedError(
                    f"rank {self.rank}: {what} did not complete within {t:g} s: a peer process "
                    "died, raised or stopped calling the same collective (timeout set by "
                    "TORCHLEAN_DIST_TIMEOUT_S)") from None
            except (ConnectionError, OSError) as e:
                self._broken()
                raise DistributedError(f"rank {self.rank}: {what}: the rendezvous on rank 0 "
                                       f"is gone ({e}): rank 0 died or left the job") from None
        if status != _OK:
            raise DistributedError(f"rank {self.rank}: {what}: {parts[0].decode()}")
        return parts

    def _send(self, data: bytes, what: str) -> None:
        if self.closed:
            raise DistributedError(f"rank {self.rank}: {what}: the connection to the "
                                   "rendezvous is closed (an earlier collective failed)")
        try:
            self.sock.settimeout(self.timeout_s)
            self.sock.sendall(data)
        except OSError as e:
            self._broken()
            raise DistributedError(f"rank {self.rank}: {what}: the rendezvous on rank 0 is "
                                   f"gone ({e}): rank 0 died or left the job") from None

    def _broken(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass

    def close(self) -> None:
        """Leave the job: goodbye to the server; rank 0 then serves the others until they
        have left too (at most the deadline)."""
        if not self.closed:
            self.closed = True
            try:
                self.sock.settimeout(5.0)
                self.sock.sendall(_BYE)
                _recv_exact(self.sock, 1)
            except OSError:
                pass
            self.sock.close()
        if self.server is not None:
            self.server.wait_all_left(self.timeout_s)
            self.server.close()
            self.server = None
