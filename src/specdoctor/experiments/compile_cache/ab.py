"""Compile-cache A/B: the same launch twice, with the cache as found and with a fresh isolated
cache root, measured the same way; a verdict with both profiles side by side (Case A's H2).

The isolated arm redirects every compile cache vLLM uses: ``VLLM_CACHE_ROOT`` (vLLM's own and
its AOT cache), ``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR``, all under a new
directory. specdoctor never deletes, moves or edits the user's cache: the as-found arm is the
user's own launch, unchanged (it reads and writes what that launch always does), and only the
isolated root, which this module created, is removed afterwards unless kept.

Verdict (``decide``): "recovered" when the isolated arm accepts clearly more (a two-proportion
test on accepted / drafted tokens, z > 3), "no effect" when the two agree (|z| ≤ 2), and
"inconclusive" otherwise: an arm that failed to start or to measure (with its log tail), the
isolated arm accepting less, or a difference in between. Draft tokens of one request are not
independent, so the z is a screen, not a p-value: on greedy runs of a deterministic server the
two arms are either identical or not.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.errors import SpecdoctorError
from specdoctor.experiments.compile_cache import scan as scanmod
from specdoctor.launch import servers
from specdoctor.launch.spec import LaunchSpec

CACHE_ENV = ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
MeasureFn = Callable[[str], AcceptanceProfile]


@dataclass
class Arm:
    name: str                          # "as-found" or "isolated"
    env_changes: dict[str, str]
    log_path: str
    profile: AcceptanceProfile | None = None
    error: str | None = None
    log_tail: str = ""
    cache_lines: list[dict[str, Any]] = field(default_factory=list)  # saved / loaded / failed

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "env_changes": self.env_changes, "log": self.log_path,
                "profile": self.profile.to_json() if self.profile else None,
                "error": self.error, "log_tail": self.log_tail,
                "cache_lines": self.cache_lines}


@dataclass
class ABResult:
    verdict: str                       # "recovered", "no effect", "inconclusive"
    evidence: list[str]
    found: Arm
    isolated: Arm
    launch: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "evidence": self.evidence,
                "as_found": self.found.to_json(), "isolated": self.isolated.to_json(),
                "launch": self.launch}


def isolated_env(root: Path) -> dict[str, str]:
    return {"VLLM_CACHE_ROOT": str(root / "vllm"),
            "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
            "TRITON_CACHE_DIR": str(root / "triton")}


def decide(found: AcceptanceProfile | None, isolated: AcceptanceProfile | None
           ) -> tuple[str, list[str]]:
    """The verdict from the two profiles alone (pure)."""
    if found is None or isolated is None:
        return "inconclusive", ["an arm has no measurement"]
    n1, n2 = found.draft_tokens or 0, isolated.draft_tokens or 0
    a1, a2 = found.accepted_tokens or 0, isolated.accepted_tokens or 0
    if n1 == 0 or n2 == 0:
        return "inconclusive", ["an arm drafted no tokens"]
    p1, p2 = a1 / n1, a2 / n2
    ev = [f"acceptance rate as found {p1:.3f} ({a1}/{n1}), isolated {p2:.3f} ({a2}/{n2})"]
    for name, prof in (("as found", found), ("isolated", isolated)):
        pos = prof.per_position
        if pos:
            ev.append(f"per position {name}: " + ", ".join(f"{x:.3f}" for x in pos))
    if (a1, n1) == (a2, n2) and found.accepted_per_position == isolated.accepted_per_position:
        return "no effect", ev + ["identical counts in both arms"]
    pool = (a1 + a2) / (n1 + n2)
    se = math.sqrt(pool * (1 - pool) * (1 / n1 + 1 / n2))
    z = (p2 - p1) / se if se > 0 else (math.inf if p2 > p1 else -math.inf)
    ev.append(f"difference isolated − as found {p2 - p1:+.3f} (z {z:+.1f})")
    if z > 3:
        return "recovered", ev + [("a fresh cache restores acceptance: the cache as found "
                                   "changes what the server computes")]
    if abs(z) <= 2:
        return "no effect", ev
    if z < -3:
        return "inconclusive", ev + ["the isolated arm accepts less: not a cache effect"]
    return "inconclusive", ev + ["a difference too small to call"]


# One arm's measurement (greedy, code prompts); each server may take ``servers.READY_TIMEOUT_S``
# to boot.
AB_PROMPTS = 8
AB_MAX_TOKENS = 32


def ab(spec: LaunchSpec, measure_fn: MeasureFn, *, workdir: Path | None = None,
       timeout_s: float = servers.READY_TIMEOUT_S, keep_isolated: bool = False,
       on_progress: Callable[[str], None] | None = None) -> ABResult:
    """Run ``spec`` as found, then with an isolated cache root; ``measure_fn(url)`` measures
    each arm the same way. Never raises for an arm that fails: the verdict says so."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="specdoctor-cache-ab-"))
    workdir.mkdir(parents=True, exist_ok=True)
    iso_root = workdir / "isolated-cache"
    found = _arm("as-found", spec, {}, workdir, measure_fn, timeout_s, on_progress)
    isolated = _arm("isolated", spec, isolated_env(iso_root), workdir, measure_fn, timeout_s,
                    on_progress)
    if not keep_isolated:
        shutil.rmtree(iso_root, ignore_errors=True)
    if found.error or isolated.error:
        ev = [f"{a.name} arm: {a.error}" for a in (found, isolated) if a.error]
        return ABResult("inconclusive", ev, found, isolated, spec.to_json())
    verdict, ev = decide(found.profile, isolated.profile)
    return ABResult(verdict, ev, found, isolated, spec.to_json())


def _arm(name: str, spec: LaunchSpec, env: dict[str, str], workdir: Path,
         measure_fn: MeasureFn, timeout_s: float,
         on_progress: Callable[[str], None] | None) -> Arm:
    log = workdir / f"{name}.log"
    log.write_bytes(b"")
    arm = Arm(name, env, str(log))
    run_spec = dataclasses.replace(spec, env={**spec.env, **env}) if env else spec
    if on_progress:
        on_progress(f"{name}: starting the server")
    try:
        with servers.running(run_spec, log, timeout_s) as server:
            if on_progress:
                on_progress(f"{name}: measuring")
            arm.profile = measure_fn(server.url)
    except SpecdoctorError as exc:
        arm.error = str(exc).splitlines()[0]
    except Exception as exc:  # noqa: BLE001 - a failed arm is evidence, not a crash
        arm.error = f"{type(exc).__name__}: {exc}"
    text = log.read_bytes().decode("utf-8", "replace") if log.is_file() else ""
    arm.cache_lines = [{"path": p, **u.to_json()} for p, u in scanmod.log_uses(text, name)]
    if arm.error:
        arm.log_tail = servers.tail(log, 20)
    return arm


def protocol_measure(num_prompts: int = AB_PROMPTS, max_tokens: int = AB_MAX_TOKENS,
                     suite: str = "code") -> MeasureFn:
    """A ``measure_fn`` running specdoctor's measurement protocol (greedy, one warm-up)."""
    from specdoctor.bench import measure as proto

    # refused now, before either server starts
    proto.MeasureParams(num_prompts=num_prompts, max_tokens=max_tokens, suite=suite).check()

    def measure(url: str) -> AcceptanceProfile:
        from specdoctor.bench import measure as proto
        from specdoctor.bench.prompts import take

        m = proto.run(url, take(suite, num_prompts),
                      proto.MeasureParams(num_prompts=num_prompts, max_tokens=max_tokens,
                                          suite=suite))
        if m.total is None:
            raise RuntimeError(m.error or "the measurement produced no profile")
        return m.total

    return measure
