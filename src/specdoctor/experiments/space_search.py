"""The contract's space searched through the oracle: a file-side loss no reference points to.

The reference review (``experiments.contract.compare``) finds a field that differs from what
something else says it should be: the target's config, the engine's default, the tokenizer,
training metadata. A key that is missing where the engine's default is not what the drafter
was trained with, or a flag written with the default's value, differs from no reference. This
search does not ask for one: it tries every change of the served config that the engine's code
tells apart (``contract.space``), each through the oracle on the diagnosis' prompts.

How a change is decided (the same held-out rule as the layer-id search):
- every change is scored on all prompts; the best is chosen on half of them (the even ones);
- it is then compared with the served config on the other half, paired over prompts and over
  drafts (``rules.decide_gain``): a significant gain of the margin confirms it (basis
  counterfactual), an interval below the margin excludes the space, and between the two the
  same comparison runs on fresh prompts of the diagnosis' suites;
- a flag switched on that does not run alone is tried with each parameter it may need;
- a change that alters the attention mask the drafter is served with (its window or causality,
  as ``served_files.stated_masks`` reads the config) is an ``attention-mask`` cause; any other,
  ``draft-config-mismatch``.

The changed drafters are copies under neutral names (``cf-<n>/draft``).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specdoctor.errors import SpecdoctorError
from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.experiments.contract import compare as cmp
from specdoctor.experiments.contract import space
from specdoctor.experiments.contract.contract import Contract
from specdoctor.served_files import read_config, stated_masks
from specdoctor.verdict import rules
from specdoctor.verdict.findings import Finding, Verdict

# Seconds a run of the oracle is allowed to need before the deadline when deciding whether
# another change fits.
ORACLE_RUN_S = 30.0
# Where the changed copies go (``cf-<FIRST + n>``): apart from the reference leads' copies.
FIRST_COPY = 700
FRESH_MIN = 4
# What a changed copy may raise in the oracle when the change is one the code cannot take.
NOT_RUNNING = (SpecdoctorError, KeyError, ValueError, TypeError, RuntimeError, IndexError,
               AttributeError)


def copy_with(draft_dir: Path, edits: tuple[tuple[str, Any], ...], workdir: Path, n: int
              ) -> Path:
    """A copy of the drafter under a neutral name with ``edits`` applied to its config."""
    out = workdir / f"cf-{n}" / "draft"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(draft_dir, out, symlinks=False)
    cfg = json.loads((out / "config.json").read_text())
    for key, value in edits:
        cfg = cmp.put(cfg, key, value)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    return out


def hypothesis_of(method: str | None, draft: dict[str, Any], move: space.Move) -> str:
    """``attention-mask`` when the change alters a draft layer's window or causality as the
    config states them; else ``draft-config-mismatch``."""
    n = int(draft.get("num_hidden_layers") or 1)
    after = draft
    for key, value in move.edits:
        after = cmp.put(after, key, value)
    return ("attention-mask" if stated_masks(after, method, n) != stated_masks(draft, method, n)
            else "draft-config-mismatch")


def context_bound(ctx: Context) -> int:
    """The longest sequence the diagnosis asks the server to hold: the longest prompt (its
    characters, a bound on its tokens) plus the tokens generated, within --max-model-len."""
    longest = max((len(p) for p in ctx.prompts), default=0) + int(ctx.max_tokens or 0)
    cap = ctx.settings.max_model_len if ctx.settings is not None else None
    return min(longest, cap) if cap else longest


def per_draft(units: Any, rows: list[int]) -> float:
    u = units[rows]
    drafts = float(u[:, 0].sum())
    return float(u[:, 1:].sum()) / drafts if drafts else 0.0


@dataclass
class Outcome:
    finding: Finding | None            # None: nothing the space holds was decided
    numbers: dict[str, Any] = field(default_factory=dict)
    curve: Any = None


def search(ctx: Context, contract: Contract, tried: frozenset[str]) -> Outcome:
    """The space of ``contract`` for the served drafter, through the oracle (the module's rule).
    ``tried``: keys the reference review already tried."""
    from specdoctor.experiments.oracle_gap import expected_profile, run_oracle, served_oracle

    assert ctx.draft_dir is not None
    t0 = time.perf_counter()
    draft = read_config(ctx.draft_dir)
    bound = context_bound(ctx)
    queue = space.moves(contract, draft, bound, tried, readable=contract.oracle_reads)
    if not queue:
        return Outcome(None, {"moves": 0})
    served = served_oracle(ctx).prompt_units()
    every = list(range(len(ctx.prompts)))
    if ctx.k and per_draft(served, every) >= ctx.k - 1e-9:
        return Outcome(None, {"moves": len(queue), "not_searched": (
            f"the served files' oracle accepts all {ctx.k} draft tokens of every draft: no "
            f"change can recover anything")})
    scored: list[tuple[space.Move, Any]] = []
    failed: list[str] = []
    n = FIRST_COPY

    def more() -> bool:
        return ctx.deadline is None or time.monotonic() + ORACLE_RUN_S < ctx.deadline

    while queue and more():
        move = queue.pop(0)
        ctx.progress(f"oracle counterfactual, the contract's space: {move.text(draft)}")
        try:
            res = run_oracle(ctx, 0.0, 1.0, copy_with(ctx.draft_dir, move.edits, ctx.workdir, n))
            scored.append((move, res.prompt_units()))
        except NOT_RUNNING as exc:
            failed.append(f"{move.text(draft)} ({type(exc).__name__})")
            if move.kind == "flag":
                queue += space.with_parameters(contract, draft, move, bound)
        n += 1
    nums: dict[str, Any] = {"moves": len(scored) + len(failed), "scored": len(scored),
                            "not_running": failed[:12], "untried": len(queue),
                            "context_bound": bound}
    if not scored:
        nums["search_s"] = round(time.perf_counter() - t0, 1)
        return Outcome(None, nums)
    half_a = list(range(0, len(ctx.prompts), 2))
    half_b = list(range(1, len(ctx.prompts), 2)) or half_a
    best_i = max(range(len(scored)), key=lambda i: (per_draft(scored[i][1], half_a), -i))
    move, units = scored[best_i]
    nums["served_all"] = round(per_draft(served, every), 4)
    nums["scores"] = {m.text(draft): round(per_draft(u, every), 4) for m, u in sorted(
        scored, key=lambda x: -per_draft(x[1], half_a))[:10]}
    h = hypothesis_of(ctx.method, draft, move)
    head = (f"the contract's space ({len(scored)} change(s) of the served config scored through "
            f"the oracle"
            + (f", {len(failed)} that do not run" if failed else "")
            + (f", {len(queue)} not tried (time)" if queue else "")
            + f"): best on half the prompts {move.text(draft)}, "
            f"{per_draft(served, half_a):.3f} → {per_draft(units, half_a):.3f} accepted per "
            f"draft there")
    nums.update(best=move.text(draft), hypothesis=h,
                half_a=[round(per_draft(served, half_a), 4), round(per_draft(units, half_a), 4)],
                half_b=[round(per_draft(served, half_b), 4), round(per_draft(units, half_b), 4)])
    ceiling = common.ceiling(ctx)
    if not rules.oracle_change_is_real(per_draft(served, half_a), per_draft(units, half_a),
                                       ceiling):
        nums["search_s"] = round(time.perf_counter() - t0, 1)
        return Outcome(Finding(h, Verdict.EXCLUDED, f"{head}: no change rises beyond numerics "
                               "there"), nums)
    held = rules.decide_gain(h, "held out on the other half", rules.paired_gain(
        units[half_b], served[half_b]), ceiling)
    nums["held_out"] = held.evidence
    if held.verdict is Verdict.INCONCLUSIVE:
        fresh = _fresh(ctx, h, move, n, ceiling)
        if fresh is not None:
            nums["fresh"] = fresh.evidence
            held = replace(fresh, evidence=f"not decided on the held-out half ({held.evidence});"
                           f" {fresh.evidence}")
    nums["search_s"] = round(time.perf_counter() - t0, 1)
    if held.verdict is Verdict.CONFIRMED:
        after = expected_profile(_Units(units))
        base_all = per_draft(served, every)
        rivals = [f"{m.text(draft)} ({per_draft(u, every):.3f})" for m, u in scored
                  if m.field != move.field
                  and rules.oracle_change_is_real(base_all, per_draft(u, every), ceiling)]
        also = (f"; other changes that also rise on all prompts (served {base_all:.3f}): "
                f"{', '.join(rivals[:4])} — the files alone cannot say which the drafter was "
                f"trained with" if rivals else "")
        nums["also_rising"] = rivals
        return Outcome(replace(held, evidence=f"{head}; {held.evidence}{also}",
                               basis="counterfactual"), nums, after)
    if held.verdict is Verdict.EXCLUDED:
        return Outcome(replace(held, evidence=f"{head}: no change recovers on the held-out half "
                               f"({held.evidence})", basis=None, size=None), nums)
    return Outcome(replace(held, evidence=f"{head}: not decided ({held.evidence})",
                           unchecked=(f"{move.text(draft)} (the space's best, not decided)",)),
                   nums)


@dataclass(frozen=True)
class _Units:
    """Per-prompt units as the oracle's result gives them (for ``expected_profile``)."""

    units: Any

    def prompt_units(self) -> Any:
        return self.units


def _fresh(ctx: Context, h: str, move: space.Move, n: int, ceiling: float) -> Finding | None:
    """The best change against the served config on prompts of the diagnosis' suites that it
    never measured: a second held-out set. None when there are too few of them."""
    from specdoctor.experiments.oracle_gap import oracle_config
    from specdoctor.oracle.runner import run_oracle as run

    assert ctx.draft_dir is not None
    fresh = common.fresh_prompts(ctx)
    if len(fresh) < FRESH_MIN:
        return None
    ctx.progress(f"oracle counterfactual, the contract's space: {len(fresh)} fresh prompts")
    copy = copy_with(ctx.draft_dir, move.edits, ctx.workdir, n)
    try:
        after = run(replace(oracle_config(ctx, 0.0, 1.0, copy), prompts=fresh)).prompt_units()
        before = run(replace(oracle_config(ctx, 0.0, 1.0), prompts=fresh)).prompt_units()
    except NOT_RUNNING:
        return None
    return rules.decide_gain(h, f"on {len(fresh)} fresh prompts of the same suites",
                             rules.paired_gain(after, before), ceiling)
