"""The measurement protocol against a live server (vLLM's counters, or llama-server's).

1. Scrape ``/metrics`` (refuse a server with speculation off).
2. One warm-up request (fills missing graph shapes; its counters are kept apart).
3. Scrape again, then send N fixed prompts, greedy, at concurrency c.
4. Scrape again. The run's figures are the counter delta of step 3→4 only; a restart in between
   is reported, never turned into a figure.

Per-request units for the bootstrap come from the responses' own spec-decode metrics when the
server has ``--per-request-spec-decode-metrics`` on (the lab does); else, at concurrency 1, from
a scrape after every request; else there is no interval and the result says why.

If the server dies midway, what was measured (finished requests, their metrics, the scrapes
taken) is returned with ``error`` set, so the caller can keep it.

llama-server (started with ``--metrics``) is read the same way, from its own counters
(``sources.llamacpp``): ``/metrics`` gives ``llamacpp:spec_decode_*`` (drafts, draft tokens,
accepted tokens, accepted per position), and every response its own ``timings.draft_n`` and
``timings.draft_n_accepted``, the per-request units. Those carry no verification-step count, so
the per-request figures have no draft count: the run's mean acceptance length comes from the
scrapes, and its interval is not given (the acceptance rate's is).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.acceptance.bootstrap import with_bootstrap
from specdoctor.acceptance.profile import AcceptanceProfile, sum_profiles
from specdoctor.bench import http
from specdoctor.errors import InputError, SpecdoctorError, TargetError
from specdoctor.sources import llamacpp, prometheus, vllm_response


@dataclass(frozen=True)
class MeasureParams:
    num_prompts: int = 16
    concurrency: int = 1
    max_tokens: int = 64
    suite: str = "code"
    temperature: float = 0.0
    top_p: float = 1.0
    ignore_eos: bool = True
    # Base sampling seed: request i is sent seed + i, so sampled runs repeat exactly and the
    # requests (the bootstrap's units) still draw independent random streams. None: no seed.
    seed: int | None = 0
    # Recorded with the run: runs stored before per-request seeds sent one seed to every request.
    seed_per_request: bool = True
    model: str | None = None
    # Where per-request counters (the bootstrap's units) come from: the responses' own
    # spec-decode metrics, a /metrics scrape after each request (concurrency 1 only), or auto.
    per_request: str = "auto"

    def check(self) -> None:
        """Refuse settings the protocol cannot run, naming the fix (before any request)."""
        from specdoctor.bench.prompts import SUITES, check_concurrency, check_count

        if self.max_tokens < 1:
            raise InputError("--max-tokens must be at least 1", "e.g. --max-tokens 64")
        check_count(self.num_prompts)
        check_concurrency(self.concurrency)
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise InputError(f"--temperature {self.temperature} / --top-p {self.top_p} is out "
                             "of range", "use --temperature >= 0 and 0 < --top-p <= 1")
        if self.per_request not in PER_REQUEST_SOURCES:
            raise InputError(f"unknown per-request source {self.per_request!r}",
                             f"choose one of: {', '.join(PER_REQUEST_SOURCES)}")
        if self.per_request == "scrape" and self.concurrency != 1:
            raise InputError("--per-request scrape needs --concurrency 1",
                             "concurrent requests share the counters; use --per-request response")
        if self.suite not in SUITES:
            raise InputError(f"no prompt suite {self.suite!r}",
                             f"choose one of: {', '.join(sorted(SUITES))}")


PER_REQUEST_SOURCES = ("auto", "response", "scrape")
# How long the first wave of a concurrency pass waits for its last worker to start.
WAVE_WAIT_S = 30.0


@dataclass
class RequestRecord:
    index: int
    prompt: str
    completion_tokens: int
    latency_s: float
    profile: AcceptanceProfile | None
    per_step: tuple[list[int], list[int]] | None = None
    text: str = ""
    # the response's own metrics when ``profile`` came from scrapes instead
    response_profile: AcceptanceProfile | None = None
    sent_at: float | None = None   # time.perf_counter() when sent (concurrent passes)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "completion_tokens": self.completion_tokens,
                               "latency_s": round(self.latency_s, 4), **_counts(self.profile)}
        if self.response_profile is not None:
            out["response"] = _counts(self.response_profile)
        return out


def _counts(p: AcceptanceProfile | None) -> dict[str, Any]:
    if p is None:
        return {"drafts": None}
    return {"drafts": p.drafts, "draft_tokens": p.draft_tokens, "accepted_tokens": p.accepted_tokens,
            "accepted_per_position": list(p.accepted_per_position or [])}


@dataclass
class Scrape:
    phase: str
    taken_at: float
    text: str
    reading: prometheus.CounterReading


@dataclass
class Measurement:
    url: str
    model: str
    params: MeasureParams
    scrapes: list[Scrape] = field(default_factory=list)
    requests: list[RequestRecord] = field(default_factory=list)
    warmup: AcceptanceProfile | None = None
    total: AcceptanceProfile | None = None
    wall_s: float = 0.0
    unit: str = "none"
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    engine: str = "vllm"   # whose counters the scrapes read: vllm or llamacpp

    @property
    def output_tokens(self) -> int:
        return sum(r.completion_tokens for r in self.requests)

    @property
    def output_tok_s(self) -> float | None:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else None

    @property
    def requests_per_step(self) -> float | None:
        """Requests the server's engine steps carried on average over the pass: request-steps
        over engine steps between the scrapes around it. Request-steps are counted from below
        twice and the larger count kept: the drafts (a request drafts at most once a step;
        prompt lookup drafts at few steps, so alone this understates its batch), and the tokens
        answered less the draft tokens accepted (each request-step emits one token of its own;
        tokens cut off by max_tokens only lower it). Prefill steps count as steps, so a pass of
        one request at a time reads a little under 1. None where the server does not count its
        steps or the pass was not scraped on both sides."""
        if len(self.scrapes) < 2 or self.scrapes[-1].phase != "after":
            return None
        before = next((x for x in self.scrapes if x.phase == "before"), None)
        after = self.scrapes[-1]
        if before is None or before.reading.iterations is None or after.reading.iterations is None:
            return None
        steps = after.reading.iterations - before.reading.iterations
        b, a = before.reading.profile, after.reading.profile
        drafts = (a.drafts or 0) - (b.drafts or 0)
        if steps <= 0 or drafts < 0:
            return None
        own = 0
        if a.accepted_tokens is not None and b.accepted_tokens is not None:
            own = self.output_tokens - (a.accepted_tokens - b.accepted_tokens)
        return max(drafts, own) / steps

    @property
    def mean_in_flight(self) -> float | None:
        """Requests in flight on average over the pass: the sum of the requests' latencies
        over the time from the first sent to the last answered (the pass's wall time where
        send times were not kept). Near ``concurrency`` when they ran together; near 1 when each ended
        before the next arrived (a small model's requests can, however many were sent)."""
        sent = [r.sent_at for r in self.requests]
        if self.requests and all(t is not None for t in sent):
            span = (max(r.sent_at + r.latency_s for r in self.requests)   # type: ignore[operator]
                    - min(sent))                                          # type: ignore[type-var]
            return mean_in_flight([r.latency_s for r in self.requests], span)
        return mean_in_flight([r.latency_s for r in self.requests], self.wall_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "url": self.url,
            "model": self.model,
            "params": self.params.__dict__,
            "total": self.total.to_json() if self.total else None,
            "warmup": self.warmup.to_json() if self.warmup else None,
            "requests": len(self.requests),
            "output_tokens": self.output_tokens,
            "wall_s": round(self.wall_s, 3),
            "mean_in_flight": _round_or_none(self.mean_in_flight, 3),
            "requests_per_step": _round_or_none(self.requests_per_step, 3),
            "output_tok_s": None if self.output_tok_s is None else round(self.output_tok_s, 3),
            "interval_unit": self.unit,
            "per_request": [r.to_json() for r in self.requests],
            "notes": self.notes,
            "error": self.error,
        }


    def store_run(self, launch_spec: dict[str, Any] | None = None) -> dict[str, Any]:
        """This measurement as one run of the store (``Store.add_run(**run)``): the result
        printed by ``--json``, the raw scrapes and every request, failed runs included."""
        return {
            "kind": "measure", "engine": self.engine, "target": self.url,
            "params": self.params.__dict__, "result": self.to_json(),
            "profile": self.total.to_json() if self.total else None,
            "status": "failed" if self.error else "ok", "error": self.error,
            "launch_spec": launch_spec,
            "scrapes": [(sc.phase, sc.taken_at, sc.text) for sc in self.scrapes],
            "requests": [{"index": r.index, "prompt": r.prompt,
                          "completion_tokens": r.completion_tokens, "latency_s": r.latency_s,
                          "profile": r.profile.to_json() if r.profile else None,
                          "per_step": list(r.per_step) if r.per_step else None}
                         for r in self.requests],
        }


@dataclass(frozen=True)
class StoredRun:
    """A ``measure`` run read back from the store, request by request."""

    run_id: int
    params: dict[str, Any]
    prompts: list[str]
    rows: list[list[int]]                 # per request: drafts, accepted at each position
    launch_spec: dict[str, Any] | None


def load_run(db_path: Path, run_id: int) -> StoredRun:
    """A recorded ``measure`` run with its per-request acceptance (what ``store_run`` wrote);
    refused, with the fix, when it is another kind of run or has no per-request counts."""
    from specdoctor.store.db import open_store

    store = open_store(db_path)
    try:
        row = store.run(run_id)
        reqs = store.requests(run_id) if row.kind == "measure" else []
    finally:
        store.close()
    if row.kind != "measure":
        raise InputError(f"run {run_id} is a {row.kind!r} run",
                         "compare against a run recorded by `specdoctor measure`")
    if not reqs:
        raise InputError(f"run {run_id} has no per-request records",
                         "measure again; the oracle compares request by request")
    rows = []
    for req in reqs:
        p = req.profile
        if not p or p.get("drafts") is None or p.get("accepted_per_position") is None:
            raise InputError(f"request {req.index} of run {run_id} has no per-request acceptance",
                             "measure a server started with --per-request-spec-decode-metrics "
                             "detailed (the lab is)")
        rows.append([p["drafts"], *p["accepted_per_position"]])
    return StoredRun(run_id, dict(row.result.get("params") or {}), [r.prompt for r in reqs],
                     rows, row.launch_spec)


@dataclass(frozen=True)
class ModelCard:
    """One entry of ``/v1/models``: the name requests use, and what vLLM adds (0.32,
    vllm/entrypoints/openai/models/serving.py): ``root``, the model as the server was started
    with it (``--model``: a local path or a hub id), and its maximum length."""

    id: str
    root: str | None = None
    max_model_len: int | None = None


def model_cards(body: str) -> list[ModelCard]:
    """The models a ``/v1/models`` body lists (a pure function); ValueError when it is not a
    model list."""
    import json

    try:
        data = json.loads(body)["data"]
        cards = [ModelCard(str(d["id"]),
                           d.get("root") if isinstance(d.get("root"), str) else None,
                           d.get("max_model_len") if type(d.get("max_model_len")) is int else None)
                 for d in data]
    except (KeyError, TypeError, AttributeError, RecursionError) as exc:  # nested past the stack
        raise ValueError("not a model list") from exc
    if not cards:
        raise ValueError("an empty model list")
    return cards


def served_models(url: str) -> list[ModelCard]:
    """What ``GET /v1/models`` lists (TargetError when the server does not answer with one)."""
    body = http.get_text(url.rstrip("/") + "/v1/models")
    try:
        return model_cards(body)
    except ValueError as exc:
        raise TargetError(f"{url}/v1/models did not list a model",
                          "pass --model NAME, or check that this is an OpenAI-compatible server") from exc


def served_model(url: str) -> str:
    return served_models(url)[0].id


def scrape(url: str, phase: str) -> Scrape:
    text = http.get_text(url.rstrip("/") + "/metrics")
    try:
        reading = counter_reading(text)
    except SpecdoctorError as exc:
        raise TargetError(
            f"{url}/metrics has no speculative-decoding counters ({exc.problem})",
            "start the server with --speculative-config (vLLM), or with -md and --metrics "
            "(llama-server); specdoctor measures speculation",
        ) from exc
    return Scrape(phase, time.time(), text, reading)


def counter_reading(text: str) -> prometheus.CounterReading:
    """One /metrics body as counters: llama-server's ``llamacpp:spec_decode_*`` when present
    (no ``_created`` samples: a restart shows only as a counter that went down), else vLLM's."""
    if LLAMACPP_COUNTERS in text:
        return prometheus.CounterReading(llamacpp.profile_from_prometheus(text))
    return prometheus.parse_text(text)


LLAMACPP_COUNTERS = "llamacpp:spec_decode_"


def engine_of(reading_text: str) -> str:
    return "llamacpp" if LLAMACPP_COUNTERS in reading_text else "vllm"


# What a request to llama-server also says so that it samples from temperature and top_p alone,
# as vLLM does: its own defaults add top_k 40 and min_p 0.05 (and keep a repeat penalty
# setting), which narrow the target's distribution and raise sampled acceptance.
NEUTRAL_SAMPLING = {"llamacpp": {"top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0}}


def request_body(model: str, prompt: str, p: MeasureParams, index: int = 0,
                 engine: str = "vllm") -> dict[str, Any]:
    """The /v1/completions body of request ``index`` (its own seed: ``p.seed + index``)."""
    body: dict[str, Any] = {
        "model": model, "prompt": prompt, "max_tokens": p.max_tokens,
        "temperature": p.temperature, "top_p": p.top_p, **NEUTRAL_SAMPLING.get(engine, {}),
    }
    if p.seed is not None:
        body["seed"] = p.seed + index if p.seed_per_request else p.seed
    if p.ignore_eos:
        body["ignore_eos"] = True
    return body


def complete(url: str, model: str, prompt: str, p: MeasureParams, index: int = 0,
             engine: str = "vllm") -> tuple[dict[str, Any], float]:
    body = request_body(model, prompt, p, index, engine)
    t0 = time.perf_counter()
    resp = http.post_json(url.rstrip("/") + "/v1/completions", body)
    return resp, time.perf_counter() - t0


def _round_or_none(x: float | None, nd: int) -> float | None:
    return None if x is None else round(x, nd)


def mean_in_flight(latencies: Sequence[float], wall_s: float) -> float | None:
    """Time-averaged number of requests in flight: Σ latency / wall (pure)."""
    if wall_s <= 0 or not latencies:
        return None
    return sum(latencies) / wall_s


def _record(i: int, prompt: str, resp: dict[str, Any], latency: float) -> RequestRecord:
    usage = resp.get("usage") or {}
    if isinstance(resp.get("timings"), dict):   # llama-server: its own per-request counters
        return RequestRecord(
            index=i, prompt=prompt, completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=latency, profile=llamacpp_profile(resp),
            text=(resp.get("choices") or [{}])[0].get("text", ""))
    block = vllm_response.speculative_block(resp) or (
        vllm_response.speculative_block(resp["choices"][0]) if resp.get("choices") else None
    )
    text = (resp.get("choices") or [{}])[0].get("text", "")
    return RequestRecord(
        index=i, prompt=prompt, completion_tokens=int(usage.get("completion_tokens", 0)),
        latency_s=latency,
        profile=vllm_response.profile_from_block(block) if block else None,
        per_step=vllm_response.per_step(block) if block else None,
        text=text,
    )


def llamacpp_profile(resp: dict[str, Any]) -> AcceptanceProfile:
    """One llama-server response's acceptance: ``timings.draft_n`` draft tokens of which
    ``timings.draft_n_accepted`` accepted (the server leaves both out when the request drafted
    nothing: then zero). No draft count: the response does not give one."""
    if "draft_n" not in resp["timings"]:
        return AcceptanceProfile(drafts=0, draft_tokens=0, accepted_tokens=0)
    return llamacpp.profile_from_timings(resp)


def draft_bounds(unit: AcceptanceProfile, k: int | None) -> AcceptanceProfile:
    """A unit without a draft count (a llama-server response) with the bounds its draft tokens
    allow: at least ceil(draft tokens / k) drafts of at most k tokens (at least one where k is
    unknown), at most one per draft token. Units with a draft count are returned as they are."""
    if unit.drafts is not None or unit.draft_tokens is None or unit.drafts_range is not None:
        return unit
    n = unit.draft_tokens
    low = -(-n // k) if k else min(n, 1)
    return dataclasses.replace(unit, drafts_range=(low, n))


def measure(url: str, params: MeasureParams,
            on_request: Callable[[int], None] | None = None) -> Measurement:
    """The protocol on ``params.num_prompts`` prompts of ``params.suite`` (what ``specdoctor
    measure`` runs); settings are checked first."""
    from specdoctor.bench.prompts import take

    params.check()
    return run(url, take(params.suite, params.num_prompts), params, on_request)


def run(
    url: str,
    prompts: list[str],
    params: MeasureParams,
    on_request: Callable[[int], None] | None = None,
) -> Measurement:
    """Run the protocol. Raises TargetError before anything is measured; afterwards a failure
    is returned in ``error`` together with what was measured."""
    url = url.rstrip("/")
    model = params.model or served_model(url)
    m = Measurement(url=url, model=model, params=params)
    m.scrapes.append(scrape(url, "before-warmup"))
    m.engine = engine_of(m.scrapes[0].text)
    resp, lat = complete(url, model, prompts[0], params, engine=m.engine)  # warm-up
    warm = _record(-1, prompts[0], resp, lat)
    m.scrapes.append(scrape(url, "before"))
    m.warmup = _delta_or_note(m, m.scrapes[0], m.scrapes[1])
    per_request_scrapes = params.per_request == "scrape" or (
        params.per_request == "auto" and params.concurrency == 1 and warm.profile is None)
    try:
        t0 = time.perf_counter()
        if per_request_scrapes:
            _run_sequential_with_scrapes(m, url, model, prompts, params, on_request)
        else:
            _run_concurrent(m, url, model, prompts, params, on_request)
        m.wall_s = time.perf_counter() - t0
        m.scrapes.append(scrape(url, "after"))
    except SpecdoctorError as exc:
        m.wall_s = time.perf_counter() - t0
        m.error = str(exc)
        m.notes.append(f"stopped after {len(m.requests)} of {len(prompts)} requests")
        m.total = _from_requests(m)
        return m
    m.total = _delta_or_note(m, m.scrapes[1], m.scrapes[-1])
    derive_drafts(m)
    _attach_intervals(m)
    return m


def _run_concurrent(m: Measurement, url: str, model: str, prompts: list[str],
                    params: MeasureParams, on_request: Callable[[int], None] | None) -> None:
    # The first wave leaves together: a worker thread can take tens of milliseconds to start
    # on a busy machine, and a small model answers a request in less, so requests sent as
    # their threads come up would each run alone (a concurrency pass that never had its
    # concurrency). Each first-wave worker waits until all of them are up.
    wave = max(1, min(params.concurrency, len(prompts)))
    ready = threading.Barrier(wave)

    def send(i: int, p: str) -> tuple[dict[str, Any], float, float]:
        if i < wave:
            try:
                ready.wait(timeout=WAVE_WAIT_S)
            except threading.BrokenBarrierError:
                pass   # a worker that never came up: send anyway
        sent = time.perf_counter()
        return (*complete(url, model, p, params, i, m.engine), sent)

    with ThreadPoolExecutor(max_workers=params.concurrency) as pool:
        futures = {pool.submit(send, i, p): (i, p) for i, p in enumerate(prompts)}
        failure: SpecdoctorError | None = None
        for fut in as_completed(futures):
            i, p = futures[fut]
            try:
                resp, lat, sent = fut.result()
            except SpecdoctorError as exc:
                failure = failure or exc
                continue
            m.requests.append(dataclasses.replace(_record(i, p, resp, lat), sent_at=sent))
            if on_request:
                on_request(len(m.requests))
        m.requests.sort(key=lambda r: r.index)
        if failure:
            raise failure
    m.unit = "request" if all(r.profile is not None for r in m.requests) else "none"


def _run_sequential_with_scrapes(m: Measurement, url: str, model: str, prompts: list[str],
                                 params: MeasureParams,
                                 on_request: Callable[[int], None] | None) -> None:
    prev = m.scrapes[-1]
    for i, p in enumerate(prompts):
        resp, lat = complete(url, model, p, params, i, m.engine)
        rec = _record(i, p, resp, lat)
        now = scrape(url, f"after-request-{i}")
        d = prometheus.delta(prev.reading, now.reading)
        rec.response_profile = rec.profile
        rec.profile = None if d.restarted else d.profile
        prev = now
        m.requests.append(rec)
        if on_request:
            on_request(len(m.requests))
    m.unit = "request (scrape after each)"


def _delta_or_note(m: Measurement, a: Scrape, b: Scrape) -> AcceptanceProfile | None:
    d = prometheus.delta(a.reading, b.reading)
    if d.restarted:
        m.notes.append(f"between scrapes '{a.phase}' and '{b.phase}': {d.reason}")
        m.error = m.error or f"the server restarted during the run ({d.reason})"
        return None
    return d.profile


def _from_requests(m: Measurement) -> AcceptanceProfile | None:
    units = [r.profile for r in m.requests if r.profile is not None]
    if not units:
        return None
    m.notes.append("figures from the finished requests' own metrics (no final scrape)")
    return sum_profiles(units)


def derive_drafts(m: Measurement) -> None:
    """A llama-server response counts draft tokens and accepted ones, not its verification
    steps. Each step after the first token yields the accepted tokens plus one, so a request of
    ``n`` completion tokens with ``a`` accepted took ``n - 1 - a`` steps, and drafted at each
    but where the token budget left no room (at most its last step). Those steps stand for the
    request's drafts when, over the run, they exceed the drafts of the server's own counter
    (``/metrics``) by at most one a request; the note says by how many, which understates
    accepted per draft by that share. Otherwise the drafts per request stay bounds."""
    if m.engine != "llamacpp" or m.total is None or m.total.drafts is None or not m.requests:
        return
    if any(r.profile is None or r.profile.drafts is not None for r in m.requests):
        return
    steps = [llamacpp.request_steps(r.completion_tokens, r.profile.accepted_tokens or 0,
                                    r.profile.draft_tokens or 0) for r in m.requests]
    extra = sum(steps) - m.total.drafts
    if not 0 <= extra <= len(steps):
        m.notes.append(f"llama.cpp gives no drafts per request, and its steps (completion "
                       f"tokens - 1 - accepted: {sum(steps)} over the run) do not match the "
                       f"server's {m.total.drafts} drafts: per-request drafts stay bounds")
        return
    for r, n in zip(m.requests, steps):
        r.profile = dataclasses.replace(r.profile, drafts=n)
    m.notes.append(f"drafts per request are its steps (completion tokens - 1 - accepted): "
                   f"{sum(steps)} over the run against the server's {m.total.drafts} drafts, "
                   f"{extra} step(s) at a request's end with no room to draft counted as "
                   f"drafts ({extra / max(m.total.drafts, 1):.1%} of them); llama.cpp gives no "
                   f"per-position counts per request")


def drafts_unknown(m: Measurement) -> bool:
    """Whether a llama-server run counted its drafts in all but left some request's unknown."""
    return (m.engine == "llamacpp" and m.total is not None and m.total.drafts is not None
            and bool(m.requests) and all(r.profile is not None for r in m.requests)
            and any(r.profile.drafts is None for r in m.requests))  # type: ignore[union-attr]


def drafts_from_log(m: Measurement, log_text: str) -> bool:
    """Drafts per request from llama-server's own log, where its responses leave them unknown
    (``derive_drafts``: with ``--spec-draft-p-min`` some steps draft nothing). At release the
    server prints a line per request: accepted / generated draft tokens and the mean length,
    1 + accepted / verification steps, from which ``sources.llamacpp`` recovers the steps when
    exactly one count fits. The requests are joined to the last run of consecutive lines whose
    counts are theirs, in order, and kept only when every line's drafts were recovered and
    they add up to the server's counter; then the intervals are computed again. Returns whether
    the drafts were filled in."""
    if not drafts_unknown(m):
        return False
    lines = [w.profile for w in llamacpp.parse_log(log_text.splitlines(), "log").windows]
    want = [(r.profile.accepted_tokens, r.profile.draft_tokens) for r in m.requests]
    n = len(want)
    for start in range(len(lines) - n, -1, -1):
        seg = lines[start:start + n]
        if [(w.accepted_tokens, w.draft_tokens) for w in seg] != want:
            continue
        drafts = [w.drafts for w in seg]
        if any(d is None for d in drafts) or sum(drafts) != m.total.drafts:  # type: ignore[arg-type]
            return False
        for r, d in zip(m.requests, drafts):
            r.profile = dataclasses.replace(r.profile, drafts=d)
        m.notes.append(f"drafts per request from the server's log lines (accepted, generated "
                       f"and mean length of each request): {sum(drafts)} over the run, as its "
                       f"counter has them")  # type: ignore[arg-type]
        _attach_intervals(m)
        return True
    return False


def _attach_intervals(m: Measurement) -> None:
    units = [r.profile for r in m.requests if r.profile is not None]
    if m.total is None:
        return
    units = [draft_bounds(u, m.total.k) for u in units]
    if len(units) == len(m.requests) and units:
        summed = sum_profiles(units)
        # compare what the units count: drafts where they have them (vLLM), else draft tokens
        # (llama.cpp's drafts per request are derived, its draft tokens counted: those)
        by_drafts = summed.drafts is not None and m.engine != "llamacpp"
        counted = (lambda p: (p.drafts, p.accepted_tokens)) if by_drafts else (
            lambda p: (p.draft_tokens, p.accepted_tokens))
        if counted(summed) != counted(m.total):
            m.notes.append(
                "per-request metrics do not add up to the counter delta: other traffic reached "
                "the server during the run; intervals use the per-request figures"
            )
        m.total = with_bootstrap(m.total, units, "requests")
    else:
        m.notes.append(
            "no confidence interval: the server gives no per-request metrics "
            "(start it with --per-request-spec-decode-metrics summary, or use --concurrency 1)"
        )
