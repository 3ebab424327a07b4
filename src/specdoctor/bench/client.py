"""A lean streaming client for OpenAI-compatible servers (asyncio, raw HTTP/1.1, stdlib only).

The client must not be the bottleneck, so the per-token path does no JSON: each server-sent
event is timed and classified by bytes (a token chunk, the final usage chunk, an error, the end),
and only the final usage chunk — which carries vLLM's per-request spec-decode metrics when the
request asks ``stream_options.include_usage`` — is parsed. Text is collected only when a
multi-turn conversation needs the answer for its next turn.

Every request ends as one ``Outcome``: its token-event times (TTFT, inter-token gaps), its usage
and metrics, or the kind of failure (``timeout``, ``http``, ``connection``, ``empty``,
``stream_error``), so failures are counted per cell and never dropped.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

FAILURE_KINDS = ("timeout", "http", "connection", "empty", "stream_error")
MAX_HEADERS = 100  # what http.client allows
MAX_EVENT = 1 << 20  # bytes of one server-sent event (a token chunk is ~200, the usage ~1 kB)
MAX_ERROR_BODY = 1 << 16  # bytes of an error answer kept


@dataclass
class Outcome:
    """One streamed request, as the client saw it."""

    index: int
    started: float  # perf_counter at send
    ttft_s: float | None = None
    latency_s: float | None = None
    gaps: list[float] = field(default_factory=list)  # seconds between token events
    events: int = 0  # token-bearing events (several tokens each under speculation)
    completion_tokens: int | None = None  # from the usage chunk
    metrics: dict[str, Any] | None = None  # the response's per-request metrics
    timings: dict[str, Any] | None = None  # llama-server's last chunk: draft_n, draft_n_accepted
    text: str = ""
    error: str | None = None  # a FAILURE_KINDS value
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def tokens(self) -> int:
        """Output tokens: the server's count when it sent one, else the token events."""
        return self.completion_tokens if self.completion_tokens is not None else self.events


@dataclass(frozen=True)
class Request:
    index: int
    path: str  # /v1/completions or /v1/chat/completions
    body: dict[str, Any]
    collect_text: bool = False
    messages: tuple[dict[str, str], ...] = ()  # the conversation this request sends


class _HTTPStatus(Exception):
    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes]]:
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("the server closed the connection before answering")
    parts = status_line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise ValueError(f"no HTTP status line: {status_line[:60]!r}")
    status = int(parts[1])
    headers: dict[bytes, bytes] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        if len(headers) >= MAX_HEADERS:
            raise ValueError(f"more than {MAX_HEADERS} headers")
        k, _, v = line.partition(b":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


async def _body_chunks(reader: asyncio.StreamReader, headers: dict[bytes, bytes]):
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        while True:
            size_line = await reader.readline()
            if not size_line:
                raise ConnectionError("the stream ended mid-chunk")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if not 0 <= size <= MAX_EVENT:
                raise ValueError(f"a chunk of {size:,} bytes (the limit is {MAX_EVENT:,})")
            if size == 0:
                await reader.readline()
                return
            data = await reader.readexactly(size + 2)
            yield data[:-2]
    elif b"content-length" in headers:
        length = int(headers[b"content-length"])
        if not 0 <= length <= MAX_EVENT:
            raise ValueError(f"a Content-Length of {length:,} (the limit is {MAX_EVENT:,})")
        yield await reader.readexactly(length)
    else:
        while data := await reader.read(65536):
            yield data


async def stream(host: str, port: int, req: Request, timeout_s: float) -> Outcome:
    """Send one streaming request and time its events; never raises for a request failure."""
    out = Outcome(req.index, time.perf_counter())
    try:
        await asyncio.wait_for(_stream(host, port, req, out), timeout_s)
    except TimeoutError:
        out.error, out.detail = "timeout", f"no complete answer within {timeout_s:.0f} s"
    except _HTTPStatus as exc:
        out.error, out.detail = "http", f"HTTP {exc.status}: {exc.body[:200].decode('utf-8', 'replace')}"
    except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError,
            RecursionError) as exc:
        out.error, out.detail = "connection", f"{type(exc).__name__}: {exc}"[:200]
    if out.error is None and out.events == 0:
        out.error, out.detail = "empty", "the stream carried no tokens"
    return out


async def _stream(host: str, port: int, req: Request, out: Outcome) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        payload = json.dumps(req.body).encode()
        writer.write(
            f"POST {req.path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
            .encode() + payload)
        await writer.drain()
        status, headers = await _read_head(reader)
        if status != 200:
            body = b""
            async for c in _body_chunks(reader, headers):
                body += c
                if len(body) > MAX_ERROR_BODY:
                    break
            raise _HTTPStatus(status, body)
        buf = b""
        last = out.started
        async for chunk in _body_chunks(reader, headers):
            buf += chunk
            while (cut := buf.find(b"\n\n")) >= 0:
                event, buf = buf[:cut], buf[cut + 2:]
                now = time.perf_counter()
                if _on_event(event, out, req.collect_text, now - last, now):
                    last = now
            if len(buf) > MAX_EVENT:
                raise ValueError(f"a server-sent event past {MAX_EVENT:,} bytes")
        out.latency_s = time.perf_counter() - out.started
    finally:
        writer.close()


def _on_event(event: bytes, out: Outcome, collect: bool, gap: float, now: float) -> bool:
    """Account one SSE event; True when it carried tokens."""
    if not event.startswith(b"data:"):
        return False
    data = event[5:].strip()
    if data == b"[DONE]":
        return False
    if data.startswith((b'{"error"', b'{"object":"error"')):
        out.error, out.detail = "stream_error", data[:200].decode("utf-8", "replace")
        return False
    usage_only = b'"choices":[]' in data or b'"choices": []' in data   # vLLM's final chunk
    if usage_only or b'"timings"' in data:   # (llama-server's last chunk: usage and timings)
        _final(json.loads(data), out)
        if usage_only:
            return False
    if b'"content":""' in data or b'"text":""' in data:  # role-only or empty delta
        return False
    if out.events == 0:
        out.ttft_s = now - out.started
    else:
        out.gaps.append(gap)
    out.events += 1
    if collect:
        choice = (json.loads(data).get("choices") or [{}])[0]
        out.text += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
    return True


def _final(chunk: dict[str, Any], out: Outcome) -> None:
    """A stream's last chunk: the usage, and the server's per-request counters (vLLM's
    ``metrics``, llama-server's ``timings``)."""
    usage = chunk.get("usage") or {}
    if usage.get("completion_tokens") is not None:
        out.completion_tokens = int(usage["completion_tokens"])
    if isinstance(chunk.get("metrics"), dict):
        out.metrics = chunk["metrics"]
    if isinstance(chunk.get("timings"), dict):
        out.timings = chunk["timings"]


async def run_requests(
    base_url: str,
    requests: Sequence[Request] | Sequence[Sequence[Request]],
    concurrency: int,
    timeout_s: float,
    on_done: Callable[[Outcome], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    next_turn: Callable[[Request, Request, Outcome], Request] | None = None,
) -> tuple[list[Outcome], float]:
    """Run items with at most ``concurrency`` in flight; returns outcomes (by index) and wall s.

    An item is one request or a conversation (a sequence of requests whose later turns are
    rebuilt by ``next_turn`` from the previous answer). ``should_stop`` is asked before each
    new item: a dead server ends the cell without sending the rest."""
    u = urlsplit(base_url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    items = [r if isinstance(r, Sequence) else [r] for r in requests]
    queue: asyncio.Queue[list[Request]] = asyncio.Queue()
    for it in items:
        queue.put_nowait(list(it))
    outcomes: list[Outcome] = []

    async def worker() -> None:
        while not queue.empty():
            if should_stop is not None and should_stop():
                return
            turns = queue.get_nowait()
            prev: tuple[Request, Outcome] | None = None
            for req in turns:
                if prev is not None and next_turn is not None:
                    req = next_turn(req, *prev)
                o = await stream(host, port, req, timeout_s)
                outcomes.append(o)
                if on_done is not None:
                    on_done(o)
                if not o.ok:
                    break
                prev = (req, o)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(items))))))
    wall = time.perf_counter() - t0
    outcomes.sort(key=lambda o: o.index)
    return outcomes, wall
