"""Minimal HTTP for talking to an OpenAI-compatible server (stdlib only, so the CLI stays light)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from specdoctor.errors import TargetError


def get_text(url: str, timeout_s: float = 10.0) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        raise TargetError(f"GET {url} answered HTTP {exc.code}", _hint(url)) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise TargetError(f"cannot reach {url}: {_reason(exc)}", _hint(url)) from exc


def post_json(url: str, body: dict[str, Any], timeout_s: float = 600.0) -> dict[str, Any]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:300]
        raise TargetError(f"POST {url} answered HTTP {exc.code}: {detail}",
                          "check --model and the request parameters") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise TargetError(f"request to {url} failed: {_reason(exc)}",
                          "the server may have died; check its log") from exc


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "reason", exc))


def _hint(url: str) -> str:
    return "is the server up and is this its base URL (http://HOST:PORT)? Try: curl " + url
