"""Minimal HTTP for talking to an OpenAI-compatible server (stdlib only, so the CLI stays light).

Every request is bounded: ``timeout_s`` is an overall deadline (connecting, the status line,
the headers and the body together: a server that trickles bytes is cut there, not only one
that falls silent), and a body past ``MAX_BODY`` bytes is refused. A server that answers no
HTTP (garbage, HTTP/0.9), headers past http.client's limits, a bad Content-Length or a body
that is no JSON is the server's fault (``TargetError``, exit 3); a URL that cannot be sent
(CR/LF or spaces in it, no host) is bad input (``InputError``, exit 2).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from specdoctor.errors import InputError, TargetError

MAX_BODY = 64 << 20  # bytes: a /metrics body of vLLM is ~0.1 MB, a completion a few kB
READ_BLOCK = 1 << 16


def get_text(url: str, timeout_s: float = 10.0, max_bytes: int = MAX_BODY) -> str:
    status, body = _request("GET", url, None, timeout_s, max_bytes)
    if status >= 400:
        raise TargetError(f"GET {url} answered HTTP {status}", _hint(url))
    return body.decode("utf-8", "replace")


def post_json(url: str, body: dict[str, Any], timeout_s: float = 600.0,
              max_bytes: int = MAX_BODY) -> dict[str, Any]:
    status, raw = _request("POST", url, json.dumps(body).encode(), timeout_s, max_bytes)
    if status >= 400:
        detail = raw[:300].decode("utf-8", "replace")
        raise TargetError(f"POST {url} answered HTTP {status}: {detail}",
                          "check --model and the request parameters")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise TargetError(f"POST {url} answered no JSON ({type(exc).__name__}: "
                          f"{raw[:80].decode('utf-8', 'replace')!r})",
                          "is this an OpenAI-compatible server?") from None
    if not isinstance(doc, dict):
        raise TargetError(f"POST {url} answered a JSON {type(doc).__name__}, not an object",
                          "is this an OpenAI-compatible server?")
    return doc


def check_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path with query) of an http(s) URL; anything else is bad input."""
    if any(c in url for c in "\r\n\t ") or any(ord(c) < 32 or ord(c) == 127 for c in url):
        raise InputError(f"the URL {url!r} holds a control character or a space",
                         "pass the server's base URL, e.g. http://127.0.0.1:8000")
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError as exc:
        raise InputError(f"the URL {url!r} cannot be read: {exc}",
                         "pass the server's base URL, e.g. http://127.0.0.1:8000") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise InputError(f"the URL {url!r} is not http://HOST[:PORT]",
                         "pass the server's base URL, e.g. http://127.0.0.1:8000")
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    return u.scheme, u.hostname, port or (443 if u.scheme == "https" else 80), path


def _request(method: str, url: str, data: bytes | None, timeout_s: float,
             max_bytes: int) -> tuple[int, bytes]:
    scheme, host, port, path = check_url(url)
    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = cls(host, port, timeout=min(timeout_s, 60.0))
    deadline = time.monotonic() + timeout_s
    expired = threading.Event()

    def cut() -> None:  # the overall deadline: shut the socket, so a blocked read returns
        expired.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timer = threading.Timer(timeout_s, cut)
    timer.daemon = True
    timer.start()
    try:
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        length = resp.getheader("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > max_bytes:
            raise TargetError(f"{method} {url} announced a body of {int(length):,} bytes, past "
                              f"the limit of {max_bytes:,}", "is this the server's URL?")
        parts: list[bytes] = []
        size = 0
        while block := resp.read1(READ_BLOCK) if hasattr(resp, "read1") else resp.read(READ_BLOCK):
            size += len(block)
            if size > max_bytes:
                raise TargetError(f"{method} {url} answered more than {max_bytes:,} bytes",
                                  "is this the server's URL?")
            if time.monotonic() > deadline:
                raise TimeoutError
            parts.append(block)
        if expired.is_set():
            raise TimeoutError
        return resp.status, b"".join(parts)
    except TargetError:
        raise
    except (TimeoutError, socket.timeout) as exc:
        raise TargetError(f"{method} {url} gave no whole answer within {timeout_s:g} s",
                          _hint(url)) from exc
    except http.client.HTTPException as exc:
        if expired.is_set():
            raise TargetError(f"{method} {url} gave no whole answer within {timeout_s:g} s",
                              _hint(url)) from exc
        raise TargetError(f"{method} {url} answered no valid HTTP: {type(exc).__name__}: "
                          f"{str(exc)[:120]!r}", _hint(url)) from exc
    except (OSError, ValueError) as exc:
        what = "gave no whole answer within " + f"{timeout_s:g} s" if expired.is_set() \
            else f"failed: {exc.strerror or exc}" if isinstance(exc, OSError) else f"failed: {exc}"
        raise TargetError(f"cannot reach {url}: {method} {what}"[:400], _hint(url)) from exc
    finally:
        timer.cancel()
        conn.close()


def _hint(url: str) -> str:
    return "is the server up and is this its base URL (http://HOST:PORT)? Try: curl " + url
