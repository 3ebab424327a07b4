"""A hostile HTTP server on loopback: each mode answers the way a broken or malicious server
would (garbage, HTTP/0.9, an endless or huge header, a bad Content-Length, deeply nested JSON,
a body that trickles in, a huge body, a /metrics of a million per-position series).

It listens on 127.0.0.1 only, on a port the system picks, and is bounded: at most
``max_requests`` connections, each served for at most ``max_s`` seconds; writes stop when the
client goes away. Used by tests/cli/test_hostile_inputs.py and benchmarks/hostile_sweep.py.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

MODES = ("garbage", "http09", "huge-header", "endless-header", "bad-length", "nested-json",
         "trickle", "huge-body", "metrics-labels")
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


def metrics_series(n: int) -> Iterator[bytes]:
    """A vLLM /metrics body whose per-position counter has ``n`` positions (one series each)."""
    yield (b"# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.\n"
           b"# TYPE vllm:spec_decode_num_drafts counter\n"
           b'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0\n'
           b"# TYPE vllm:spec_decode_num_draft_tokens counter\n"
           b'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 400.0\n'
           b"# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
           b'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 250.0\n'
           + f"# TYPE {PER_POS} counter\n".encode())
    block: list[bytes] = []
    for i in range(n):
        block.append(f'{PER_POS}_total{{engine="0",model_name="m",position="{i}"}} '
                     f'{(i * 7919) % 97}.0\n'.encode())
        if len(block) == 4096:
            yield b"".join(block)
            block = []
    yield b"".join(block)


def _answer(mode: str, deadline: float) -> Iterator[bytes]:
    ok = b"HTTP/1.1 200 OK\r\n"
    if mode == "garbage":
        yield b"\x16\x03\x01garbage that is no HTTP at all\r\n\r\n"
    elif mode == "http09":
        yield b'{"data": [{"id": "m"}]}\n'
    elif mode == "huge-header":
        yield ok + b"X-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    elif mode == "endless-header":
        yield ok
        i = 0
        while time.monotonic() < deadline:
            yield f"X-H{i}: {i}\r\n".encode()
            i += 1
    elif mode == "bad-length":
        yield ok + b"Content-Length: -40\r\nContent-Type: application/json\r\n\r\n{}"
    elif mode == "nested-json":
        body = b"[" * 200_000
        yield ok + b"Content-Type: application/json\r\nContent-Length: " \
            + str(len(body)).encode() + b"\r\n\r\n" + body
    elif mode == "trickle":
        yield ok + b"Content-Type: text/plain\r\n\r\n"
        while time.monotonic() < deadline:
            yield b"#"
            time.sleep(0.2)
    elif mode == "huge-body":
        yield ok + b"Content-Type: text/plain\r\n\r\n"
        line = b"# " + b"x" * 1022 + b"\n"
        while time.monotonic() < deadline:
            yield line * 1024
    elif mode == "metrics-labels":
        yield ok + b"Content-Type: text/plain\r\n\r\n"
        yield from metrics_series(1_000_000)
    else:
        raise ValueError(mode)


class HostileServer:
    """``with HostileServer(mode) as url:`` a base URL whose every request gets ``mode``."""

    def __init__(self, mode: str, max_requests: int = 16, max_s: float = 30.0) -> None:
        self.mode, self.max_requests, self.max_s = mode, max_requests, max_s
        self.served = 0
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def __enter__(self) -> str:
        self._thread.start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set() and self.served < self.max_requests:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.served += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        deadline = time.monotonic() + self.max_s
        conn.settimeout(2.0)
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                data = conn.recv(4096)
                if not data:
                    break
                head += data
            # the request's body read too (bounded): a socket closed with unread data in it is
            # reset, and the reset can reach the client before the answer does
            top, _, body = head.partition(b"\r\n\r\n")
            length = next((int(v.strip()) for k, _, v in
                           (ln.partition(b":") for ln in top.split(b"\r\n")[1:])
                           if k.strip().lower() == b"content-length" and v.strip().isdigit()), 0)
            while len(body) < min(length, 1 << 20):
                data = conn.recv(4096)
                if not data:
                    break
                body += data
            for part in _answer(self.mode, deadline):
                if self._stop.is_set() or time.monotonic() > deadline:
                    break
                conn.sendall(part)
        except OSError:
            pass  # the client went away: what a bounded client does
        finally:
            conn.close()
