"""One benchmark cell against a live server: warm-up, scrape, the cell's requests, scrape.

The acceptance figures are the ``/metrics`` counter delta of this cell alone (cells run one
after another on a server); the intervals come from a bootstrap over the requests' own
spec-decode metrics when the server sends them. A server with speculation off (the baseline)
has no counters: its cell has throughput and latency only.

If the server stops answering mid-cell, the cell stops sending, is marked failed with the
reason, and keeps every finished request; timeouts, HTTP errors and empty streams are counted.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from specdoctor.acceptance.bootstrap import with_bootstrap
from specdoctor.acceptance.profile import AcceptanceProfile, Interval, sum_profiles
from specdoctor.bench import client, matrix, stats
from specdoctor.bench.client import Outcome
from specdoctor.bench.matrix import Cell, MatrixParams
from specdoctor.errors import SpecdoctorError
from specdoctor.launch.servers import http_ok
from specdoctor.sources import llamacpp, prometheus, vllm_response


def scrape(url: str) -> prometheus.CounterReading | None:
    """The spec-decode counters (vLLM's, or llama-server's ``llamacpp:spec_decode_*``), or
    None (unreachable server, or speculation off)."""
    from specdoctor.bench import http
    from specdoctor.bench.measure import counter_reading

    try:
        return counter_reading(http.get_text(url + "/metrics"))
    except SpecdoctorError:
        return None


def served_model(url: str) -> str | None:
    import json

    from specdoctor.bench import http

    try:
        return str(json.loads(http.get_text(url + "/v1/models"))["data"][0]["id"])
    except (SpecdoctorError, ValueError, KeyError, IndexError, TypeError, RecursionError):
        return None


def run_cell(url: str, p: MatrixParams, cell: Cell, model: str,
             on_done: Callable[[Outcome], None] | None = None,
             alive: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Run one cell; always returns its result dict (``status`` ok or failed, ``error``)."""
    url = url.rstrip("/")
    items = matrix.requests(p, cell, model)
    dead: list[str] = []

    def server_gone() -> bool:
        return bool(dead)

    def check(o: Outcome) -> None:
        if o.error in ("connection", "timeout") and not dead and (
                (alive is not None and not alive()) or not http_ok(url + "/v1/models", 5.0)):
            dead.append(f"the server stopped answering ({o.error}: {o.detail})")
        if on_done is not None:
            on_done(o)

    # warm-up: the first item's first turn, its counters kept apart
    before_warm = scrape(url)
    warm_out, _ = asyncio.run(client.run_requests(url, [items[0][0]], 1, p.timeout_s))
    before = scrape(url)
    warm_note = None
    if not warm_out[0].ok:
        if warm_out[0].error == "timeout":  # a server that trickles or stalls: every request would
            res = _result([], 0.0, None, None, p, cell)  # wait as long, so none is sent
            return _failed(res, f"warm-up failed: {warm_out[0].detail}")
        if warm_out[0].error == "connection" or not http_ok(url + "/v1/models", 5.0):
            res = _result([], 0.0, None, None, p, cell)
            return _failed(res, f"warm-up failed, server unreachable ({warm_out[0].detail})")
        warm_note = f"the warm-up request failed ({warm_out[0].error}: {warm_out[0].detail})"
    outcomes, wall = asyncio.run(client.run_requests(
        url, items, max(cell.concurrency, 1), p.timeout_s, on_done=check, should_stop=server_gone,
        next_turn=matrix.next_turn))
    after = scrape(url) if not dead else None
    res = _result(outcomes, wall, before, after, p, cell)
    if before_warm is not None and before is not None:
        res["warmup_profile"] = _delta_json(before_warm, before)
    if warm_note:
        res["notes"].append(warm_note)
    sent = len(outcomes)
    planned = sum(len(i) for i in items)
    if dead:
        return _failed(res, f"{dead[0]}; {res['requests_ok']} of {planned} requests finished")
    if res["requests_ok"] == 0:
        kinds = ", ".join(f"{n} {k}" for k, n in res["failures"].items())
        return _failed(res, f"no request finished ({kinds})")
    if sent < planned:
        res["notes"].append(f"{planned - sent} requests of later turns not sent after failures")
    return res


def _failed(res: dict[str, Any], reason: str) -> dict[str, Any]:
    res["status"], res["error"] = "failed", reason
    return res


def _delta_json(a: prometheus.CounterReading, b: prometheus.CounterReading) -> dict[str, Any] | None:
    d = prometheus.delta(a, b)
    return None if d.restarted else d.profile.to_json()


def _result(outcomes: list[Outcome], wall: float, before: prometheus.CounterReading | None,
            after: prometheus.CounterReading | None, p: MatrixParams, cell: Cell) -> dict[str, Any]:
    ok = [o for o in outcomes if o.ok]
    notes: list[str] = []
    tokens = sum(o.tokens for o in ok)
    blocks = _blocks_all(ok)
    units = [vllm_response.profile_from_block(b) for b in blocks if b]
    units = [u for u in units if u is not None]
    profile: AcceptanceProfile | None = None
    source = None
    if before is not None and after is not None:
        d = prometheus.delta(before, after)
        if d.restarted:
            notes.append(f"counters restarted during the cell ({d.reason}); figures from requests")
        else:
            profile, source = d.profile, "counters"
    if profile is None and units:
        profile, source = sum_profiles(units), "requests"
    if profile is not None and units and len(units) == len(ok):
        summed = sum_profiles(units)
        # llama-server's drafts per request are its steps: its draft tokens are what add up
        counted = ((lambda x: (x.draft_tokens, x.accepted_tokens))
                   if any(b and b.get("positions") is False for b in blocks)
                   else (lambda x: (x.drafts, x.accepted_tokens)))
        if source == "counters" and counted(summed) != counted(profile):
            notes.append("per-request metrics do not add up to the counter delta: other traffic "
                         "reached the server during the cell")
        profile = with_bootstrap(profile, units, "requests")
    elif profile is not None and profile.has_drafts:
        notes.append("no confidence interval: the server sends no per-request metrics "
                     "(vLLM: --per-request-spec-decode-metrics summary)")
    stream_tok_s = [o.tokens / o.latency_s for o in ok if o.latency_s]
    tpots = [t for o in ok if o.ttft_s is not None and o.latency_s
             for t in [stats.tpot(o.latency_s, o.ttft_s, o.tokens)] if t is not None]
    failures = Counter(o.error for o in outcomes if not o.ok)
    return {
        "cell": cell.name, "suite": cell.suite, "sampling": cell.sampling,
        "concurrency": cell.concurrency, "status": "ok", "error": None,
        "requests_sent": len(outcomes), "requests_ok": len(ok),
        "failures": dict(failures),
        "failure_examples": [f"#{o.index} {o.error}: {o.detail}" for o in outcomes if not o.ok][:3],
        "output_tokens": tokens, "wall_s": round(wall, 4),
        "tok_s": round(tokens / wall, 3) if wall > 0 and tokens else None,
        "stream_tok_s": stats.percentiles(stream_tok_s),
        "stream_tok_s_values": [round(x, 3) for x in stream_tok_s],
        "ttft_s": stats.percentiles([o.ttft_s for o in ok if o.ttft_s is not None]),
        "itl_s": stats.percentiles([g for o in ok for g in o.gaps]),
        "tpot_s": stats.percentiles(tpots),
        "profile": profile.to_json() if profile is not None else None,
        "profile_source": source,
        "accepted_histogram": stats.accepted_histogram([b for b in blocks if b]),
        "notes": notes,
        "requests": [{"index": o.index, "error": o.error, "tokens": o.tokens,
                      "ttft_s": _r(o.ttft_s), "latency_s": _r(o.latency_s), "events": o.events,
                      "spec": _counts(b)} for o, b in zip(outcomes, _blocks_all(outcomes))],
        "finished_at": time.time(),
    }


def _blocks_all(outcomes: list[Outcome]) -> list[dict[str, Any] | None]:
    return [vllm_response.speculative_block({"metrics": o.metrics}) if o.metrics
            else _llamacpp_block(o) for o in outcomes]


def _llamacpp_block(o: Outcome) -> dict[str, Any] | None:
    """llama-server's per-request counters (its last chunk's ``timings``) as the per-request
    block the bench stores: its steps (completion tokens - 1 - accepted) stand for its drafts,
    as in ``measure.derive_drafts``; no positions (``"positions": false``)."""
    t = o.timings
    if not t or "draft_n" not in t or o.completion_tokens is None:
        return None
    try:
        drafted, accepted = int(t["draft_n"]), int(t.get("draft_n_accepted", 0))
    except (TypeError, ValueError):
        return None
    if not 0 <= accepted <= drafted:
        return None
    steps = llamacpp.request_steps(o.completion_tokens, accepted, drafted)
    return {"num_spec_steps": steps, "num_draft_tokens": drafted,
            "num_accepted_draft_tokens": accepted, "positions": False}


def _counts(block: dict[str, Any] | None) -> dict[str, Any] | None:
    if not block:
        return None
    keys = ("num_spec_steps", "num_draft_tokens", "num_accepted_draft_tokens",
            "acceptance_histogram", "positions")
    return {k: block.get(k) for k in keys}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 5)


def load_profile(d: dict[str, Any] | None) -> AcceptanceProfile | None:
    """An AcceptanceProfile back from its JSON (counts and intervals)."""
    if not d:
        return None
    p = AcceptanceProfile(d.get("drafts"), d.get("draft_tokens"), d.get("accepted_tokens"),
                          tuple(d["accepted_per_position"]) if d.get("accepted_per_position") else None,
                          d.get("k"))
    ci = d.get("ci95") or {}
    return p.with_intervals({name: Interval(lo, hi) for name, (lo, hi) in ci.items()},
                            unavailable=d.get("ci95_unavailable"))
