"""The oracle as verdict experiments: greedy (engine vs weights) and sampled (verifier vs the
arithmetic of sampling), on the prompts the server was measured with.

Greedy settles the catalogue's ``oracle-equal-low`` / ``oracle-gap-engine`` rules; sampled
settles ``sampled-off-oracle`` / ``sampled-equal-oracle``. Methods: whatever
``specdoctor.oracle.runner.METHODS`` covers in this build; others are reported unavailable.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.experiments import common
from specdoctor.verdict import rules
from specdoctor.experiments.base import Context
from specdoctor.methods import LOOKUP_METHODS, NO_DRAFT_DIR
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.verdict.sizing import PER_STEP


# Drafters without a directory of their own: prompt lookup, and MTP layers that live in the
# target's checkpoint.


def oracle_unavailable(ctx: Context) -> str | None:
    from specdoctor.oracle.runner import METHODS

    if ctx.target_dir is None:
        return common.UNKNOWN_TARGET
    if ctx.method is None:
        return common.UNKNOWN_METHOD
    if ctx.k is None:
        return common.UNKNOWN_K
    if ctx.method not in METHODS:
        return (f"no oracle for method {ctx.method!r} in this build "
                f"(it covers {', '.join(METHODS)})")
    if ctx.method not in NO_DRAFT_DIR and ctx.draft_dir is None:
        return common.UNKNOWN_DRAFT
    if not ctx.prompts:
        return "no prompts were measured"
    return None


def oracle_config(ctx: Context, temperature: float, top_p: float, draft_dir: Any = None,
                  vocab_map: Any = None) -> Any:
    """The oracle's config for the served settings on the diagnosis' prompts. ``vocab_map``: a
    draft-to-target id map file; default: the map the engine applies (``ctx.oracle_vocab_map``,
    set when the drafter's tokenizer is not the target's)."""
    from specdoctor.oracle.runner import OracleConfig
    from specdoctor.oracle.simulate import LLAMACPP_ROOM, Sampling

    s = ctx.settings
    if s is None or ctx.k is None:  # oracle_unavailable says which, with the flag
        raise ValueError(oracle_unavailable(ctx) or "the served settings are unknown")
    draft_mode = "argmax" if s.draft_sample_method in ("greedy", "argmax") else "probabilistic"
    policy = ctx.method == "draft_model" and ctx.engine == "llamacpp"
    return OracleConfig(
        target=ctx.target_dir, prompts=tuple(ctx.prompts), method=ctx.method or "draft_model",
        draft=(draft_dir or ctx.draft_dir) if ctx.method not in NO_DRAFT_DIR else None,
        tokenizer=ctx.tokenizer_dir,
        k=ctx.k, max_tokens=ctx.max_tokens,
        sampling=Sampling(temperature, top_p, draft_mode),
        prompt_lookup_min=s.prompt_lookup[0], prompt_lookup_max=s.prompt_lookup[1],
        max_model_len=s.max_model_len,
        dtype=s.dtype if s.dtype in ("float32", "bfloat16", "float16") else "float32",
        vocab_map=vocab_map or ctx.oracle_vocab_map,
        # llama.cpp's drafting policy, as its command line sets it (launch.engines.LlamaCpp)
        draft_p_min=float(s.options.get("p_min") or 0.0) if policy else 0.0,
        draft_n_min=int(s.options.get("n_min") or 0) if policy else 0,
        draft_room=LLAMACPP_ROOM if ctx.engine == "llamacpp" else None)


def run_oracle(ctx: Context, temperature: float, top_p: float, draft_dir: Any = None,
               vocab_map: Any = None) -> Any:
    """The oracle of ``oracle_config`` run."""
    from specdoctor.oracle.runner import run_oracle as _run

    return _run(oracle_config(ctx, temperature, top_p, draft_dir, vocab_map))


def served_oracle(ctx: Context) -> Any:
    """The greedy oracle of the served files on the diagnosis' prompts, computed once and
    shared by every experiment that compares with it."""
    res = ctx.oracle_greedy
    if res is None:
        res = ctx.oracle_greedy = run_oracle(ctx, 0.0, 1.0)
    return res


def precision_band(ctx: Context, temperature: float, top_p: float, served: Any) -> float:
    """How far the served precision alone moves the oracle: its accepted per draft at fp32
    against ``served`` (the oracle at the served dtype), same prompts and sampling; 0 when
    served at fp32."""
    from dataclasses import replace

    from specdoctor.oracle.runner import run_oracle as _run

    cfg = oracle_config(ctx, temperature, top_p)
    if cfg.dtype == "float32":
        return 0.0
    ctx.progress(f"oracle: again at fp32 (the band {cfg.dtype} alone gives)")
    fp32 = _run(replace(cfg, dtype="float32"))
    return abs(common.apd(expected_profile(fp32)) - common.apd(expected_profile(served)))


def totals_unit(measured: Any) -> np.ndarray | None:
    """The run's totals as one unit (drafts, accepted; pure), where it counted both."""
    t = measured.total
    if t is None or not t.drafts or t.accepted_tokens is None:
        return None
    return np.array([[float(t.drafts), float(t.accepted_tokens)]])


def gap(oracle_result: Any, measured: Any, band: float = 0.0) -> tuple[rules.Gap, Any]:
    """Paired comparison over prompts; the gap in accepted per draft (``band``: what the
    served precision alone moves the oracle, ``precision_band``)."""
    from specdoctor.oracle import compare as cmp

    mu = common.units(measured)
    ou = oracle_result.prompt_units()
    totals = mu is None
    if totals:
        # No drafts per request (llama-server with --spec-draft-p-min: its steps without a
        # draft leave them unknown), but the run's own counts: the two totals, compared by
        # the count test alone (``with_counts``), with no interval over prompts.
        mu = totals_unit(measured)
        if mu is None:
            raise ValueError("the measurement has no per-request acceptance (start the server "
                             "with --per-request-spec-decode-metrics detailed, or measure at "
                             "c=1)")
        ou = ou.sum(axis=0, keepdims=True)
    k = max(ou.shape[1], mu.shape[1]) - 1
    if mu.shape[1] == 2 and ou.shape[1] > 2:   # the engine counts accepted, not per position
        ou = np.column_stack([ou[:, 0], ou[:, 1:].sum(axis=1)])
    c = cmp.compare_units(ou, mu)
    a = c.accepted_per_draft
    low, high = (None, None) if totals else (a.gap.low, a.gap.high)
    g = rules.Gap(a.measured.value or 0.0, a.oracle.value or 0.0, low, high, band)
    drafts, accepted = int(round(mu[:, 0].sum())), int(round(mu[:, 1:].sum()))
    return rules.with_counts(g, accepted, drafts, k), c


STEP_UNIT = PER_STEP


def step_gap(oracle_result: Any, measured: Any, resamples: int = 2000, seed: int = 0
             ) -> rules.Gap | None:
    """For a drafter that does not draft at every step (prompt lookup): accepted draft tokens
    per decode step, the engine's against the oracle's, paired over prompts (a bootstrap of the
    ratio of sums, 95%). An engine that drafts on fewer steps than its lookup finds a match
    loses there, and accepted per draft does not show it: the drafts it does make are accepted
    as often. A request's decode steps are its output tokens after the first, less what its
    drafts added. None where the requests' own counts are not known."""
    reqs = list(getattr(measured, "requests", None) or [])
    if not reqs or any(r.profile is None or r.profile.accepted_tokens is None for r in reqs):
        return None
    traces = list(oracle_result.traces)
    if len(traces) != len(reqs):
        return None
    mu = np.array([[r.profile.accepted_tokens, r.completion_tokens] for r in reqs], float)
    ou = np.array([[sum(st.accepted for st in t.steps), len(t.output_ids)] for t in traces],
                  float)

    def per_step(u: np.ndarray) -> float:
        acc, steps = u[:, 0].sum(), np.maximum(u[:, 1] - 1 - u[:, 0], 1).sum()
        return float(acc / steps)

    m, o = per_step(mu), per_step(ou)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(mu), size=(resamples, len(mu)))
    diffs = [per_step(ou[i]) - per_step(mu[i]) for i in idx]
    return rules.Gap(m, o, float(np.quantile(diffs, 0.025)), float(np.quantile(diffs, 0.975)),
                     unit=STEP_UNIT)


def expected_profile(oracle_result: Any) -> AcceptanceProfile:
    """The oracle's expected counts as a profile (for curves and the signature's reference)."""
    pu = oracle_result.prompt_units()
    drafts = int(round(pu[:, 0].sum()))
    per = tuple(int(round(x)) for x in pu[:, 1:].sum(axis=0))
    k = pu.shape[1] - 1
    return AcceptanceProfile(drafts, drafts * k, sum(per), per, k, notes=("oracle",))


def copy_counterfactual(ctx: Context, hypothesis: str, draft_copy: Any, lead: str, change: str,
                        nums: dict[str, Any]) -> tuple[Finding, AcceptanceProfile,
                                                       AcceptanceProfile]:
    """The oracle of a changed copy of the drafter against the served one's: confirmed if
    acceptance recovers (``rules.decide_counterfactual``). ``nums`` gets both figures; returns
    the finding and the two expected profiles (served, changed)."""
    before_p = expected_profile(served_oracle(ctx))
    after_p = expected_profile(run_oracle(ctx, 0.0, 1.0, draft_copy))
    b, a = common.apd(before_p), common.apd(after_p)
    nums.update({"before": round(b, 4), "after": round(a, 4)})
    ceiling = common.ceiling(ctx)
    f = rules.decide_counterfactual(hypothesis, f"{lead}; {change} (oracle)", b, a, ceiling,
                                    significant=rules.oracle_change_is_real(b, a, ceiling))
    return f, before_p, after_p


class OracleGreedy:
    id = "oracle-greedy"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.measured.greedy is None:
            return "no greedy measurement to compare with"
        return oracle_unavailable(ctx)

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        res = served_oracle(ctx)
        band = precision_band(ctx, 0.0, 1.0, res)
        g, c = gap(res, ctx.measured.greedy, band)
        sg = step_gap(res, ctx.measured.greedy) if ctx.method in LOOKUP_METHODS else None
        ctx.oracle_step_gap = sg
        if sg is not None and sg.below and not g.below:
            g = sg   # its drafts are accepted as often, but it drafts on fewer steps
        # the oracle's own position 0: where the engine counts accepted tokens and not each
        # position (llama-server), the comparison's one column is accepted per draft
        per = expected_profile(res).per_position
        pos0 = per[0] if per else None
        ctx.oracle_gap, ctx.oracle_pos0 = g, pos0
        found = rules.decide_oracle(g, pos0, file_side_excluded=False,
                                    trained=rules.trained_drafter(ctx.method))
        if g.bounded and ctx.measured.sampled is None:
            # Greedy is the whole measurement and the engine reaches the oracle, within 5%
            # either way: its drafts are the drafter's (a sampled measurement, when there is
            # one, decides for itself).
            found.append(Finding("engine-drafting", Verdict.EXCLUDED,
                                 f"{g.text()}: the engine reaches what its drafter gives",
                                 basis="comparison"))
        elif g.equal:
            # Not below beyond chance, but not shown equal either: the engine may lose up to
            # the interval's bound. The replay compares its drafts token by token.
            found.append(Finding("engine-drafting", Verdict.INCONCLUSIVE,
                                 f"{g.text()}: not shown below the oracle, nor within 5% of "
                                 f"it; the replay compares the engine's drafts with the "
                                 f"drafter's, step by step"))
        return ExperimentResult(self.id, found, {"comparison": c.to_json(),
                                                 "precision_band": round(band, 5),
                                                 "per_decode_step": None if sg is None else
                                                 {"measured": round(sg.measured, 4),
                                                  "oracle": round(sg.oracle, 4),
                                                  "interval": [round(sg.low or 0.0, 4),
                                                               round(sg.high or 0.0, 4)]}},
                                {"oracle (greedy)": expected_profile(res),
                                 "measured (greedy)": ctx.measured.greedy.total},
                                wall_s=time.perf_counter() - t0)


class OracleSampled:
    id = "oracle-sampled"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.measured.sampled is None or ctx.sampling is None:
            return "no sampled measurement (diagnose --sampling official, or T,top_p)"
        if ctx.oracle_gap is None:
            return "the greedy oracle comparison did not run"
        return oracle_unavailable(ctx)

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        temperature, top_p = ctx.sampling or (1.0, 1.0)
        res = run_oracle(ctx, temperature, top_p)
        sampled = ctx.measured.sampled
        band = precision_band(ctx, temperature, top_p, res)
        try:
            g, c = gap(res, sampled, band)
        except ValueError as exc:
            return ExperimentResult(self.id, [Finding(h, Verdict.INCONCLUSIVE, str(exc))
                                              for h in hypotheses], error=str(exc))
        ctx.oracle_sampled, ctx.oracle_sampled_gap = res, g
        greedy_apd = common.apd(ctx.measured.greedy.total)
        found = rules.decide_sampling(ctx.oracle_gap, g, greedy_apd)
        return ExperimentResult(self.id, found, {"comparison": c.to_json(),
                                                 "temperature": temperature, "top_p": top_p,
                                                 "precision_band": round(band, 5)},
                                {f"oracle (T={temperature:g}, top_p={top_p:g})":
                                 expected_profile(res), "measured (sampled)": sampled.total},
                                wall_s=time.perf_counter() - t0)
