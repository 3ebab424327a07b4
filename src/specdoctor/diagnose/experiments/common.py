"""What several experiments share: the server's settings read from its command, measuring a
(re)launched server, and per-request units for paired comparisons."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.bench import measure as proto
from specdoctor.errors import SpecdoctorError
from specdoctor.experiments.base import Context, Launch


@dataclass(frozen=True)
class Settings:
    """The speculative setup a launch command describes."""

    target: Path | None
    method: str | None
    k: int | None
    draft: Path | None
    tokenizer: Path | None
    prompt_lookup: tuple[int, int]
    dtype: str | None
    max_model_len: int | None
    draft_sample_method: str


def settings(launch: Launch) -> Settings:
    sc = launch.speculative_config() or {}
    method = sc.get("method")
    draft = sc.get("model") if method not in (None, "ngram", "mtp") else None
    model = launch.arg("--model")
    if model is None:  # `vllm serve MODEL`: the positional after "serve"
        argv = list(launch.argv)
        if "serve" in argv and argv.index("serve") + 1 < len(argv):
            model = argv[argv.index("serve") + 1]
    mml = launch.arg("--max-model-len")
    return Settings(
        target=Path(model) if model else None, method=method,
        k=int(sc["num_speculative_tokens"]) if sc.get("num_speculative_tokens") else None,
        draft=Path(draft) if draft else None,
        tokenizer=Path(launch.arg("--tokenizer")) if launch.arg("--tokenizer") else None,
        prompt_lookup=(int(sc.get("prompt_lookup_min") or 2), int(sc.get("prompt_lookup_max") or 4)),
        dtype=launch.arg("--dtype"), max_model_len=int(mml) if mml and mml.isdigit() else None,
        draft_sample_method=str(sc.get("draft_sample_method") or "greedy"))


def read_config(model_dir: Path) -> dict[str, Any]:
    return json.loads((model_dir / "config.json").read_text())


def params(ctx: Context, temperature: float = 0.0, top_p: float = 1.0,
           concurrency: int = 1) -> proto.MeasureParams:
    return proto.MeasureParams(num_prompts=len(ctx.prompts), concurrency=concurrency,
                               max_tokens=ctx.max_tokens, temperature=temperature, top_p=top_p,
                               suite=ctx.data.get("suite", "code"))


def measure_url(ctx: Context, url: str, p: proto.MeasureParams) -> proto.Measurement:
    return proto.run(url, list(ctx.prompts), p)


def measure_launch(ctx: Context, launch: Launch, p: proto.MeasureParams, label: str
                   ) -> tuple[proto.Measurement | None, str, str | None]:
    """Start ``launch`` on a free port, measure, stop. Returns (measurement, the server's log
    text, error). Never raises for a server that fails: the error names what happened."""
    if ctx.launcher is None:
        return None, "", "no launcher: this target cannot be restarted"
    launch = launch.with_port(ctx.free_port())
    log = ctx.workdir / f"server-{label}-{int(time.time())}.log"
    ctx.progress(f"{label}: starting the server ({launch.shell_command()[:120]}...)")
    try:
        server = ctx.launcher.start(launch, log)
    except SpecdoctorError as exc:
        return None, _read(log), f"the server did not start: {exc.problem}"
    try:
        ctx.progress(f"{label}: measuring")
        m = proto.run(server.url, list(ctx.prompts), p)
        return m, _read(log), m.error
    except SpecdoctorError as exc:
        return None, _read(log), str(exc)
    finally:
        ctx.launcher.stop(server)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def units(m: proto.Measurement) -> np.ndarray | None:
    """Rows per request: drafts, accepted at each position (the paired bootstrap's units)."""
    rows = []
    for r in m.requests:
        p = r.profile
        if p is None or p.drafts is None or p.accepted_per_position is None:
            return None
        rows.append([p.drafts, *p.accepted_per_position])
    if not rows:
        return None
    width = max(len(r) for r in rows)
    return np.array([r + [0] * (width - len(r)) for r in rows], dtype=np.float64)


def apd(p: AcceptanceProfile | None) -> float:
    return 0.0 if p is None or p.accepted_per_draft is None else float(p.accepted_per_draft)


def significantly_higher(after: AcceptanceProfile, before: AcceptanceProfile,
                         min_rel: float = 0.05) -> bool:
    """``after`` accepts more per draft than ``before``, beyond both 95% intervals when they
    exist (else beyond ``min_rel``)."""
    a, b = apd(after), apd(before)
    ia, ib = after.intervals.get("accepted_per_draft"), before.intervals.get("accepted_per_draft")
    if ia is not None and ib is not None:
        return ia.low > ib.high
    return a - b > min_rel * max(b, 1e-9)
