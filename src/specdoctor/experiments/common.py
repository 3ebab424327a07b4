"""What several experiments share: the server's settings read from its command
(``launch_settings``), the served configs, measuring a (re)launched server, the relaunch a
launch group shares, and per-request units for paired comparisons."""

from __future__ import annotations

import dataclasses
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.bench import measure as proto
from specdoctor.errors import SpecdoctorError
from specdoctor.verdict import rules
from specdoctor.experiments.base import Context
from specdoctor.experiments.launch_settings import (  # noqa: F401 - read here too
    MODEL_FLAGS, Settings, settings, settings_of,
)
from specdoctor.launch import LaunchSpec, free_port
from specdoctor.served_files import read_config


# Why an experiment that needs the served files cannot run, with the flags that give them (a
# launch command names them itself).
UNKNOWN_TARGET = "the target's model directory is unknown (give --target DIR, or --launch)"
UNKNOWN_DRAFT = "the drafter's directory is unknown (give --draft DIR)"
UNKNOWN_METHOD = ("the speculative method is unknown (give --method, or the server's start-up "
                  "log with --logs)")
UNKNOWN_K = "k is unknown (give --k)"


def relaunch_unavailable(ctx: Context, purpose: str, send: str = "measure") -> str | None:
    """Why an experiment that relaunches the user's command and sends it the diagnosis' prompts
    cannot run here (no launch command, no prompts), or None."""
    if ctx.launch is None or ctx.launcher is None:
        return f"needs a launch command to {purpose}"
    if not ctx.prompts:
        return f"no prompts to {send}"
    return None


def fresh_prompts(ctx: Context) -> tuple[str, ...]:
    """Prompts of the diagnosis' own suites that it did not measure with (in suite order): a
    second held-out set for a choice made on the measured ones."""
    from specdoctor.bench.prompts import suite

    used = set(ctx.prompts)
    out: list[str] = []
    for name in (s.strip() for s in ctx.suite.split(",")):
        try:
            out += [p for p in suite(name) if p not in used and p not in out]
        except (KeyError, ValueError, OSError):
            continue
    return tuple(out)


def configs(ctx: Context) -> tuple[dict[str, Any], dict[str, Any], Path | None]:
    """The drafter's and the target's config.json ({} where unknown or unreadable) and the
    drafter's directory; an MTP drafter lives in the target's own checkpoint."""
    def read(d: Path | None) -> dict[str, Any]:
        if d is None:
            return {}
        try:
            return read_config(d)
        except SpecdoctorError:
            return {}

    target = read(ctx.target_dir)
    draft_dir = ctx.draft_dir if ctx.draft_dir is not None else (
        ctx.target_dir if ctx.method == "mtp" else None)
    return read(draft_dir) if draft_dir != ctx.target_dir else target, target, draft_dir


def params(ctx: Context, temperature: float = 0.0, top_p: float = 1.0,
           concurrency: int = 1) -> proto.MeasureParams:
    return proto.MeasureParams(num_prompts=len(ctx.prompts), concurrency=concurrency,
                               max_tokens=ctx.max_tokens, temperature=temperature, top_p=top_p,
                               suite=ctx.suite)


def measure_url(ctx: Context, url: str, p: proto.MeasureParams) -> proto.Measurement:
    return proto.run(url, list(ctx.prompts), p)


@dataclass(frozen=True)
class LoadedPass:
    """A pass at concurrency above 1 whose requests ran together, or the closest to it: the
    pass kept, the concurrency-1 pass to compare it with when the kept pass's requests were
    made longer than asked (None: compare with the caller's own), and every pass's mean in
    flight."""

    measurement: proto.Measurement
    reference: proto.Measurement | None
    seen: tuple[float | None, ...]   # load_seen of every pass, in order

    @property
    def reached(self) -> bool:
        return load_reached(self.measurement)

    def words(self) -> str:
        m = self.measurement
        seen = ", ".join("?" if x is None else f"{x:.1f}" for x in self.seen)
        longer = (f"; kept: requests of {m.params.max_tokens} tokens, compared with c=1 at that "
                  f"length" if self.reference is not None else "")
        return (f"{len(self.seen)} pass(es) at c={m.params.concurrency}, "
                f"{load_seen(m)[1]}: {seen} (the load needs "
                f"{rules.LOAD_IN_FLIGHT_SHARE * m.params.concurrency:.1f}){longer}")


def load_seen(m: proto.Measurement) -> tuple[float | None, str]:
    """How many requests ran together in a pass, and by whose count: the server's (requests per
    engine step, from its counters) where it gives one, else the client's (requests in flight
    on average). The client's alone can read full while the server still took the requests
    one at a time (a server process too starved to admit them as they came)."""
    x = m.requests_per_step
    if x is not None:
        return x, "requests per engine step"
    return m.mean_in_flight, "requests in flight on average"


def load_reached(m: proto.Measurement) -> bool:
    x, _ = load_seen(m)
    return x is not None and x >= rules.LOAD_IN_FLIGHT_SHARE * m.params.concurrency


def measure_loaded(ctx: Context, url: str, p: proto.MeasureParams) -> LoadedPass:
    """Measure at ``p.concurrency``. Where its requests did not run together (each ended before
    the next reached the engine), again with requests ``rules.LOAD_LONGER`` times longer, up to
    ``rules.LOAD_PASSES`` passes; a longer pass that reaches the load is compared with
    concurrency 1 at its own length (measured here)."""
    first = measure_url(ctx, url, p)
    passes = [first]
    longer = dataclasses.replace(p, max_tokens=p.max_tokens * rules.LOAD_LONGER)
    while not first.error and not load_reached(passes[-1]) and len(passes) < rules.LOAD_PASSES:
        m = measure_url(ctx, url, longer)
        passes.append(m)
        if m.error:
            break
    seen = tuple(load_seen(m)[0] for m in passes)
    best = max(passes, key=lambda m: (m.error is None, load_reached(m), m is first,
                                      load_seen(m)[0] or 0.0))
    if best is first:
        return LoadedPass(first, None, seen)
    return LoadedPass(best, measure_url(ctx, url, dataclasses.replace(longer, concurrency=1)),
                      seen)


def measure_launch(ctx: Context, launch: LaunchSpec, p: proto.MeasureParams, label: str
                   ) -> tuple[proto.Measurement | None, str, str | None]:
    """Start ``launch`` on a free port, measure, stop. Returns (measurement, the server's log
    text, error). Never raises for a server that fails: the error names what happened."""
    if ctx.launcher is None:
        return None, "", "no launcher: this target cannot be restarted"
    launch = launch.with_port(free_port())
    log = ctx.workdir / f"server-{label}-{int(time.time())}.log"
    ctx.progress(f"{label}: starting the server ({launch.shell_command()[:120]}...)")
    try:
        server = ctx.launcher.start(launch, log)
    except SpecdoctorError as exc:
        return None, read_text(log), f"the server did not start: {exc.problem}"
    try:
        ctx.progress(f"{label}: measuring")
        m = proto.run(server.url, list(ctx.prompts), p)
        return m, read_text(log), m.error
    except SpecdoctorError as exc:
        return None, read_text(log), str(exc)
    finally:
        ctx.launcher.stop(server)


FRESH_STATE = "fresh-state"
STARTUP_PACK = "startup"


@dataclass
class SharedRelaunch:
    """One relaunch the experiments of a launch group share: what it ran, what it measured
    (None when it did not), its log, and why it failed."""

    group: str
    launch: LaunchSpec
    measurement: proto.Measurement | None
    log: str
    error: str | None


def fresh_state(ctx: Context) -> SharedRelaunch:
    """The launch group ``fresh-state`` (Case A's one launch session): the user's command once
    more with every compile cache redirected to a new, empty root and the ``startup`` probe pack
    after the launch's own PYTHONPATH (its probes wrap, log and return: they change nothing the
    engine computes), measured greedy on the diagnosis' prompts, then stopped. It runs once per
    diagnosis: ``compile-cache-ab`` takes its measurement as the isolated arm, ``probes`` its
    ``[probe]`` lines. The cache root it created is removed afterwards; nothing else is."""
    if FRESH_STATE in ctx.relaunches:
        return ctx.relaunches[FRESH_STATE]
    from specdoctor.experiments.compile_cache.ab import isolated_env
    from specdoctor.packs import run as packs

    assert ctx.launch is not None
    stamp = f"{int(time.time())}-{len(ctx.relaunches)}"
    root = ctx.workdir / f"isolated-cache-{stamp}"
    pack, _ = packs.prepare(STARTUP_PACK, ctx.workdir / f"startup-pack-{stamp}")
    launch = packs.with_pack(ctx.launch.with_env(**isolated_env(root)), pack, after=True)
    try:
        m, log, err = measure_launch(ctx, launch, params(ctx), FRESH_STATE)
    finally:
        shutil.rmtree(root, ignore_errors=True)   # only the root created here
    run = SharedRelaunch(FRESH_STATE, launch, m, log, err)
    ctx.relaunches[FRESH_STATE] = run
    return run


# What is kept of a server log for the experiments that read its text (the start-up lines, the
# errors): the first HEAD_BYTES and the last TAIL_BYTES of a larger log, with a line between.
LOG_HEAD_BYTES = 4 << 20
LOG_TAIL_BYTES = 28 << 20


def read_text(path: Path, head: int = LOG_HEAD_BYTES, tail: int = LOG_TAIL_BYTES) -> str:
    """A server log as text ("" when there is none), bounded: a log over ``head + tail`` bytes
    keeps its first ``head`` bytes (the start-up lines, where the engine prints its setup) and
    its last ``tail`` (what it logged last: the measured traffic, the latest errors), joined by
    a line that says how much was left out."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(0)
            if size <= head + tail:
                return fh.read().decode(errors="replace")
            first = fh.read(head)
            fh.seek(size - tail)
            last = fh.read(tail)
    except OSError:
        return ""
    left = size - head - tail
    return (first.decode(errors="replace").rsplit("\n", 1)[0]
            + f"\n[specdoctor: {left:,} bytes of this log left out between its first "
              f"{head >> 20} MiB and its last {tail >> 20} MiB]\n"
            + last.decode(errors="replace").split("\n", 1)[-1])


def units(m: proto.Measurement) -> np.ndarray | None:
    """Rows per request: drafts, accepted at each position (the paired bootstrap's units); where
    the engine counts no positions (llama.cpp), drafts and accepted in all (two columns)."""
    rows = []
    for r in m.requests:
        p = r.profile
        if p is None or p.drafts is None:
            return None
        if p.accepted_per_position is not None:
            rows.append([p.drafts, *p.accepted_per_position])
        elif p.accepted_tokens is not None and not any(len(x) > 2 for x in rows):
            rows.append([p.drafts, p.accepted_tokens])   # no positions (llama.cpp): the total
        else:
            return None
    if len({len(x) == 2 for x in rows}) > 1:
        return None
    if not rows:
        return None
    width = max(len(r) for r in rows)
    return np.array([r + [0] * (width - len(r)) for r in rows], dtype=np.float64)


def apd(p: AcceptanceProfile | None) -> float:
    return 0.0 if p is None or p.accepted_per_draft is None else float(p.accepted_per_draft)


def ceiling(ctx: Context) -> float:
    """What accepted per draft can reach at most: k (1 where k is unknown)."""
    return float(ctx.k or 1)


def significantly_higher(after: AcceptanceProfile, before: AcceptanceProfile,
                         min_rel: float = 0.05) -> bool:
    """``after`` accepts more per draft than ``before``, beyond both 95% intervals when they
    exist (else beyond ``min_rel``)."""
    a, b = apd(after), apd(before)
    ia, ib = after.intervals.get("accepted_per_draft"), before.intervals.get("accepted_per_draft")
    if ia is not None and ib is not None:
        return ia.low > ib.high
    return a - b > min_rel * max(b, 1e-9)
