"""Counterfactuals on the drafter's config: the same drafter with a suspect field set to the
value a reference gives, run through the oracle or relaunched.

This is the only way ``draft-config-mismatch`` (and ``attention-mask`` through a mask field) is
confirmed: a change that recovers acceptance (the finding's basis is ``counterfactual``). A
change that does not recover excludes that field. A difference alone is no verdict.

Leads come from the drafter's contract (``experiments/contract``): every key the installed vLLM
reads for the served method, found in vLLM's own source, compared with every reference there is
(the target's config, vLLM's default for the key, the tokenizer for a token id, the target's
range and the fc's width for layer ids, the checkpoint's tensors for a flag that drops them,
training metadata in the checkpoint). A key vLLM never reads, or rewrites itself, is no lead
whatever its value; a size the checkpoint's tensors pin is none either. The leads other
experiments left in ``ctx.leads`` (``from_context``: a rope theta the live engine or the
engine's own functions default where the target's differs, a mask field the masks experiment
names) are tried too, a field once.

How each lead is tried:
- through the oracle (no restart) where the engine reaches the oracle of the served files, for
  keys the oracle itself reads (its loaders and transformers' model classes, read by the same
  static pass): a key the oracle does not read would show no change there, so it is left to the
  relaunch (inconclusive, with the reason);
- the leads of one hypothesis together, then each alone (through the oracle always; on a
  relaunch while the budget allows, or when together they recover), so a lead that recovers is
  named and one that only harms does not hide it; a lead with several candidate values (a
  placeholder token: the tokenizer's special tokens in turn) tries them in order;
- layer ids no file can check (inside the target, as many as the fc reads) are searched: every
  set the fc can take, through the oracle in one pass (``oracle.heads.search``), the best chosen
  on half of the prompts and held out on the other half (``rules.decide_gain``, paired over
  those prompts and over their drafts): a significant gain is confirmed with a copy naming it;
  only an interval that rules out a gain excludes; between the two the best set stays open,
  named, and the relaunch tries it first on the user's launch (all prompts, the same paired
  decision). A search the oracle cannot run is said not to have been checked. The sets
  are searched with the fields that already recovered alone applied (a wrong mask token can
  hide the right layers), and the winner is confirmed together with them and alone;
- fields that each recover alone are named in one finding, with what they recover together;
- a served drafter the oracle cannot run (ids naming one state twice) counts as accepting
  nothing, and a copy that runs is tried against that.

What could not be checked (a key no reference gives a value for, a lead the oracle does not
read, a layer search a relaunch cannot run, candidate values left untried) keeps its hypothesis
inconclusive and is listed in the finding's ``unchecked``.

The changed drafter is a copy under a neutral temporary name (``cf-<n>/draft``), so nothing in
its path says what was changed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specdoctor.errors import SpecdoctorError
from specdoctor.experiments import common, space_search
from specdoctor.verdict import rules
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.verdict.findings import Lead as BaseLead
from specdoctor.experiments.contract import compare as cmp
from specdoctor.experiments.contract import contract as contract_mod
from specdoctor.experiments.oracle_gap import (
    expected_profile, oracle_unavailable, run_oracle, served_oracle,
)
from specdoctor.served_files import read_config, tensor_shapes

_ABSENT = cmp.ABSENT
HYPOTHESES = ("draft-config-mismatch", "attention-mask")
# Minutes one relaunch takes when deciding whether another fits before the deadline.
RELAUNCH_MIN = 3.0
# Candidate values of one lead tried in turn before giving up on it.
MAX_TRIES = 4
# The source of a layer set the oracle's search chose but its held-out half did not decide:
# left in ``ctx.leads`` for the relaunch to try first.
SEARCHED = "oracle-counterfactual search"


@dataclass(frozen=True)
class Lead:
    field: str            # what the evidence names
    draft_value: Any
    value: Any            # the counterfactual value (_ABSENT: the field removed)
    hypothesis: str
    why: str
    edits: tuple[tuple[str, Any], ...] = ()   # (dotted field, value or _ABSENT); () = field
    alternatives: tuple[cmp.Candidate, ...] = ()   # further values to try, best first
    strength: str = "differs"
    search: bool = False          # layer ids: the alternatives are a search, oracle only
    oracle_reads: bool | None = None   # does the oracle read this field (None: unknown)
    source: str = ""              # where the value comes from

    def change(self) -> str:
        return f"{self.field} {_show(self.draft_value)} → {_show(self.value)}"

    def config_edits(self) -> tuple[tuple[str, Any], ...]:
        return self.edits or ((self.field, self.value),)

    def trying(self, c: cmp.Candidate) -> Lead:
        """The same lead with another of its candidate values."""
        return replace(self, value=c.value, edits=c.edits, source=c.source)


def _show(v: Any) -> str:
    if v is _ABSENT:
        return "(absent)"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_show(x)}" for k, x in v.items()) + "}"
    return json.dumps(v)


def joint(found: list[Lead]) -> Lead:
    """Several leads of one hypothesis as one change (their edits applied together)."""
    if len(found) == 1:
        return found[0]
    return Lead(" + ".join(x.field for x in found), {x.field: x.draft_value for x in found},
                {x.field: x.value for x in found}, found[0].hypothesis,
                "; ".join(x.why for x in found),
                tuple(e for x in found for e in x.config_edits()))


def get(cfg: dict[str, Any], dotted: str) -> Any:
    return cmp.get(cfg, dotted)


put = cmp.put


def lead_of(s: cmp.Suspect, contract: contract_mod.Contract | None = None) -> Lead | None:
    """A contract suspect as a counterfactual lead (None: nothing to try)."""
    if not s.candidates:
        return None
    first, rest = s.candidates[0], s.candidates[1:]
    keys = [e[0] for e in first.edits] or [s.key]
    reads = None if contract is None else (
        None if any(contract.oracle_reads(k) is None for k in keys)
        else all(contract.oracle_reads(k) for k in keys))
    return Lead(s.key, s.value, first.value, s.hypothesis, s.why, first.edits, rest, s.strength,
                s.search, reads, first.source)


def leads(draft: dict[str, Any], target: dict[str, Any], method: str | None,
          inputs: cmp.Inputs | None = None,
          contract: contract_mod.Contract | None = None) -> list[Lead]:
    """The changes worth a counterfactual, each with the value to try, from the drafter's
    contract with the installed vLLM."""
    m = method or "draft_model"
    contract = contract or contract_mod.build(m, draft, target)
    x = inputs or cmp.Inputs(m, draft, target)
    out = [lead_of(s, contract) for s in cmp.review(contract, x).suspects]
    return [lead for lead in out if lead is not None]


def patched_copy(draft_dir: Path, lead: Lead, workdir: Path, n: int) -> Path:
    """A copy of the drafter under a neutral name with the lead's fields changed."""
    return space_search.copy_with(draft_dir, lead.config_edits(), workdir, n)


@dataclass
class Review:
    """The drafter's contract and its review for one diagnosis, or why there is none."""

    leads: list[Lead]
    review: cmp.Review | None = None
    contract: contract_mod.Contract | None = None
    error: str | None = None

    def numbers(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.contract is not None:
            out["contract"] = {"engine": self.contract.engine,
                               "model_class": self.contract.model_class,
                               "files": self.contract.files, "notes": self.contract.notes,
                               "keys_read": len(self.contract.keys())}
        if self.review is not None:
            out["review"] = self.review.to_json()
        if self.error:
            out["contract_error"] = self.error
        return out

    def unchecked(self, hypothesis: str) -> list[str]:
        return [] if self.review is None else [t for h, t in self.review.unchecked
                                               if h == hypothesis]


def review_for(ctx: Context) -> Review:
    """The contract of the served method and the drafter's files against it (the installed
    vLLM's source is read once per process and setup)."""
    method = ctx.method or "draft_model"
    own = ctx.draft_dir if method != "mtp" else ctx.target_dir
    if own is None or ctx.target_dir is None:
        return Review([], error="the drafter's and the target's directories are unknown")
    try:
        d, t = read_config(own), read_config(ctx.target_dir)
        contract = contract_mod.build(method, d, t)
        x = _inputs(ctx, method, own, d, t)
        review = cmp.review(contract, x)
    except (SpecdoctorError, OSError, ValueError, SyntaxError) as exc:
        return Review([], error=f"the contract could not be read: {type(exc).__name__}: {exc}")
    own_leads = [x for x in (lead_of(s, contract) for s in review.suspects) if x is not None]
    others = [replace(x, oracle_reads=contract.oracle_reads(x.field))
              for x in from_context(ctx.leads, d, {x.field for x in own_leads})]
    return Review(own_leads + others, review, contract)


def _inputs(ctx: Context, method: str, own: Path, d: dict[str, Any], t: dict[str, Any]
            ) -> cmp.Inputs:
    from specdoctor.experiments.contract import tokens

    tok_dir = ctx.tokenizer_dir or ctx.target_dir
    facts = tokens.read(tok_dir) if tok_dir is not None else None
    counts: dict[int, int] = {}
    if facts is not None and tok_dir is not None and ctx.prompts:
        for key in cmp.leaves(d):
            v = cmp.get(d, key)
            if cmp.TOKEN_ID.search(key.rsplit(".", 1)[-1]) and isinstance(v, int) \
                    and not isinstance(v, bool):
                n = tokens.count_in(tok_dir, list(ctx.prompts), v)
                if n is not None:
                    counts[v] = n
    return cmp.Inputs(method, d, t, tensor_shapes(own), facts, cmp.training_metadata(own),
                      counts)


def from_context(found: list[Any], draft: dict[str, Any], known: set[str]) -> list[Lead]:
    """The leads other experiments left in the context (``base.Lead``: the probes' live view,
    the engine's own config functions, the masks), as counterfactual leads, a field once."""
    out: list[Lead] = []
    for x in found:
        if x.field in known:
            continue
        known.add(x.field)
        out.append(Lead(x.field, get(draft, x.field), _ABSENT if x.remove else x.value,
                        x.hypothesis, f"{x.why} ({x.source})"))
    return out


Trial = tuple[Finding, Any, dict[str, float]]   # finding, the curve after (or None), numbers


def search(found: list[Lead], hypotheses: tuple[str, ...], trial: Callable[[Lead, int], Trial],
           more: Callable[[], bool] = lambda: True, always_alone: bool = False
           ) -> tuple[list[Finding], dict[str, Any], dict[str, Any]]:
    """Try the leads of each hypothesis: alone when there is one; else together first, and
    each alone when together they recover (while ``more()``) to name the field — or whatever
    together gave, with ``always_alone`` (cheap trials: a lead that harms must not hide one
    that recovers). A lead alone tries its further candidate values in turn until one
    recovers.

    Returns the findings (several per hypothesis; ``rules.one_per_hypothesis`` reduces them),
    the curves after each change, and the numbers."""
    tried: list[Finding] = []
    curves: dict[str, Any] = {}
    nums: dict[str, Any] = {}
    n = 0

    def run(lead: Lead) -> Finding:
        nonlocal n
        f, curve, numbers = trial(lead, n)
        n += 1
        if curve is not None:
            curves[f"after {lead.change()}"] = curve
        nums[lead.change()] = numbers
        return f

    winners: dict[str, Lead] = {}   # field → the value that recovered alone

    def alone(lead: Lead) -> Finding:
        f, used, n_tried = run(lead), lead, 0
        open_ = [f] if f.verdict is Verdict.INCONCLUSIVE else []
        for c in lead.alternatives[:MAX_TRIES - 1]:
            if f.verdict is Verdict.CONFIRMED or not more():
                break
            used = lead.trying(c)
            f = run(used)
            n_tried += 1
            open_ += [f] if f.verdict is Verdict.INCONCLUSIVE else []
        if f.verdict is Verdict.CONFIRMED:
            winners[lead.field] = used
        elif open_ and f.verdict is Verdict.EXCLUDED:   # a value left open is no exclusion
            f = replace(open_[0], evidence=f"{open_[0].evidence}; {f.evidence}")
        elif lead.alternatives[n_tried:]:   # values no run tried: say so
            rest = ", ".join(_show(c.value) for c in lead.alternatives[n_tried:][:8])
            f = replace(f, verdict=Verdict.INCONCLUSIVE,
                        evidence=f"{f.evidence}; not tried: {lead.field} = {rest}",
                        unchecked=(f"{lead.field} = {rest}",))
        return f

    for h in hypotheses:
        mine = [x for x in found if x.hypothesis == h]
        if not mine:
            continue
        if len(mine) == 1:
            tried.append(alone(mine[0]))
            continue
        together = run(joint(mine))
        if together.verdict is not Verdict.CONFIRMED and not always_alone:
            tried.append(together)
            continue
        single: list[Finding] = []
        n_alone = 0
        for lead in mine:
            if not more():
                break
            n_alone += 1
            single.append(alone(lead))
        recovered = [f for f in single if f.verdict is Verdict.CONFIRMED]
        if len(recovered) == 1:
            tried += recovered   # the field that recovers alone names the cause
            continue
        if recovered:   # several recover alone: together, with the values that recovered
            both = [winners[x.field] for x in mine if x.field in winners]
            again = both != mine or together.verdict is not Verdict.CONFIRMED
            tried.append(combined(h, run(joint(both)) if again and more() else together,
                                  recovered))
            continue
        if together.verdict is not Verdict.CONFIRMED:
            tried += [together, *single]
            continue
        rest = ("no field alone recovers: they act together" if n_alone == len(mine) else
                f"which of them alone: {len(mine) - n_alone} not run (time)")
        tried.append(Finding(h, Verdict.CONFIRMED, f"{together.evidence}; {rest}",
                             recovered=together.recovered, size=together.size))
    return tried, curves, nums


def combined(h: str, together: Finding, alone: list[Finding]) -> Finding:
    """Several fields that each recover alone: one finding naming them all, with what they
    recover together (the share is the larger of together's and the best alone)."""
    share = max([f.recovered or 0.0 for f in (together, *alone)])
    verdict = Verdict.CONFIRMED if any(f.verdict is Verdict.CONFIRMED
                                       for f in (together, *alone)) else together.verdict
    sizes = [f.size for f in (together, *alone) if f.size is not None]
    return Finding(h, verdict, f"together: {together.evidence}; each alone: "
                   + "; ".join(f.evidence for f in alone), recovered=share,
                   size=max(sizes, key=lambda z: z.loss) if sizes else None)


def _no_leads(exp: str, hypotheses: tuple[str, ...], r: Review,
              engine: str | None = None) -> ExperimentResult:
    """No lead: every hypothesis excluded, or left open where a key could not be checked.
    ``engine``: the server's, where it is not the engine whose reading the contract is."""
    if r.contract is None:
        why = "nothing to set"
    elif engine in (None, "vllm"):
        why = (f"no key {r.contract.engine} reads of this drafter differs from a reference: "
               f"nothing to set")
    else:
        why = (f"no key of this drafter's config differs from a reference (compared as "
               f"{r.contract.engine} would read it; the server is {engine}, which reads its "
               f"drafter's own files): nothing to set")
    if r.review is not None and r.review.ignored:
        why += f" (ignored by the engine, no lead: {', '.join(r.review.ignored[:6])})"
    out = []
    for h in hypotheses:
        if h not in HYPOTHESES:
            continue
        open_ = r.unchecked(h)
        out.append(Finding(h, Verdict.INCONCLUSIVE if open_ else Verdict.EXCLUDED,
                           why + (f"; not checked: {'; '.join(open_)}" if open_ else ""),
                           unchecked=tuple(open_)))
    return ExperimentResult(exp, out, r.numbers())


def _verdicts(hypotheses: tuple[str, ...], tried: list[Finding], r: Review) -> list[Finding]:
    """Per hypothesis: what its trials found; excluded when none of its kind differs; what no
    reference could check keeps it open (inconclusive, naming the fields)."""
    out = [replace(f, basis="counterfactual") if f.verdict is Verdict.CONFIRMED else f
           for f in tried]
    for h in hypotheses:
        if h not in HYPOTHESES:
            continue
        mine = [f for f in out if f.hypothesis == h]
        if any(f.verdict is Verdict.CONFIRMED for f in mine):
            continue
        open_ = r.unchecked(h)
        if open_:
            out.append(Finding(h, Verdict.INCONCLUSIVE, "not checked (no reference says what "
                               f"the value should be): {'; '.join(open_)}",
                               unchecked=tuple(open_)))
        elif not mine:
            out.append(Finding(h, Verdict.EXCLUDED, "no field of this kind differs"))
    return out


# -- layer ids: a search through the oracle ------------------------------------------------------

def tapped(method: str, draft: dict[str, Any], layers: int, lead: Lead | None = None
           ) -> tuple[int, ...] | None:
    """The aux ids vLLM taps for ``draft`` (with ``lead``'s edits applied)."""
    cfg = draft
    if lead is not None:
        for k, v in lead.config_edits():
            cfg = put(cfg, k, v)
    return cmp.effective_ids(method, cfg, layers)


def layer_search(ctx: Context, lead: Lead, trial: Callable[[Lead, int], Trial], n: int,
                 default: tuple[int, ...] | None, base: tuple[Lead, ...] = ()
                 ) -> tuple[Finding, dict[str, Any], Any]:
    """Every candidate set of ``lead`` through the oracle at once; the best on the even
    prompts, held out on the odd ones; a winner is then confirmed by ``trial`` (a copy naming
    it, all prompts).

    ``base``: changes of other fields that already recovered alone. The sets are searched with
    them applied (a wrong mask token can hide which layers are right), and the winner is
    confirmed both together with them and alone."""
    from specdoctor.oracle.heads.search import aux_search

    assert ctx.draft_dir is not None and ctx.target_dir is not None
    method = ctx.method or "eagle3"
    d, t = read_config(ctx.draft_dir), read_config(ctx.target_dir)
    layers = int((t.get("text_config") or t).get("num_hidden_layers") or 0)
    options = [lead, *[lead.trying(c) for c in lead.alternatives]]
    sets = [tapped(method, d, layers, x) for x in options]
    served = tapped(method, d, layers) or default
    pairs = [(x, s) for x, s in zip(options, sets) if s]
    if not pairs:
        return (Finding(lead.hypothesis, Verdict.INCONCLUSIVE,
                        f"{lead.field}: no candidate set to search"), {}, None)
    loadable = patched_copy(ctx.draft_dir, joint([*base, pairs[0][0]]), ctx.workdir, 500 + n)
    width = len(pairs[0][1])
    cands = [s for _, s in pairs] + ([served] if served and len(served) == width else [])
    ctx.progress(f"oracle counterfactual: {lead.field}, {len(pairs)} candidate layer sets")
    res = aux_search(method, ctx.target_dir, loadable, list(ctx.prompts), cands, ctx.k or 3,
                     ctx.max_tokens, ctx.tokenizer_dir)
    half_a = list(range(0, len(ctx.prompts), 2))
    half_b = list(range(1, len(ctx.prompts), 2)) or half_a
    best = max(range(len(pairs)), key=lambda i: (res.per_draft(i, half_a), -i))
    s_idx = len(pairs) if len(cands) > len(pairs) else None
    a_after, b_after = res.per_draft(best, half_a), res.per_draft(best, half_b)
    top = res.per_draft(best)
    ties = [list(pairs[i][1]) for i in range(len(pairs))
            if i != best and abs(res.per_draft(i) - top) <= 0.01 * max(top, 1e-9)]
    nums: dict[str, Any] = {"sets": len(pairs), "best": list(pairs[best][1]),
                            "best_all": round(top, 4), "ties": ties[:10],
                            "search_s": round(res.wall_s, 1)}
    head = (f"{lead.field}: searched {len(pairs)} sets of {width} target layers through the "
            "oracle" + (f" with {', '.join(b.change() for b in base)}" if base else "")
            + f"; best on half the prompts {list(pairs[best][1])} (as vLLM taps them)")
    held: Finding | None = None
    if s_idx is not None:
        a_before, b_before = res.per_draft(s_idx, half_a), res.per_draft(s_idx, half_b)
        nums.update(served=list(served or ()), served_all=round(res.per_draft(s_idx), 4),
                    half_a=[round(a_before, 4), round(a_after, 4)],
                    half_b=[round(b_before, 4), round(b_after, 4)])
        head += (f": {a_before:.3f} → {a_after:.3f} accepted per draft there, held out on the "
                 f"other half {b_before:.3f} → {b_after:.3f} (served {list(served or ())})")
        held = rules.decide_gain(lead.hypothesis, "held out", rules.paired_gain(
            res.units(best, half_b), res.units(s_idx, half_b)), common.ceiling(ctx))
        nums["held_out"] = held.evidence
        if held.verdict is Verdict.EXCLUDED:
            return (replace(held, evidence=f"{head}: no set recovers on the held-out half "
                            f"({held.evidence})", recovered=0.0), nums, None)
        if held.verdict is Verdict.INCONCLUSIVE:
            fresh = fresh_check(ctx, method, loadable, pairs[best][1], served, lead)
            if fresh is not None:
                nums["fresh"] = fresh.evidence
                if fresh.verdict is Verdict.EXCLUDED:
                    return (replace(fresh, evidence=f"{head}; not decided there "
                                    f"({held.evidence}); {fresh.evidence}", recovered=0.0),
                            nums, None)
                if fresh.verdict is Verdict.CONFIRMED:
                    held = replace(fresh, evidence=f"not decided on the held-out half "
                                   f"({held.evidence}); {fresh.evidence}")
        if held is not None and held.verdict is Verdict.INCONCLUSIVE:
            chosen = pairs[best][0]
            ctx.leads.append(BaseLead(lead.hypothesis, lead.field, chosen.value,
                                      f"the best of {len(pairs)} layer sets on half the "
                                      f"prompts, not decided on the other half", SEARCHED))
            return (Finding(lead.hypothesis, Verdict.INCONCLUSIVE,
                            f"{head}: the best set is not decided on the held-out half "
                            f"({held.evidence}); a relaunch naming it decides",
                            recovered=held.recovered,
                            unchecked=(f"{lead.field} = {_show(chosen.value)} (the search's "
                                       "best, not decided)",)), nums, None)
    extra = f"; ties: {ties[:4]}" if ties else ""
    f, curve, numbers = trial(pairs[best][0], n)
    nums["confirm"] = numbers
    if not base:
        if held is None:
            return replace(f, evidence=f"{head}; confirmed with a copy naming it: "
                           f"{f.evidence}{extra}"), nums, curve
        f = _as_searched(f, numbers, top, held)   # the held-out half decided it
        return replace(f, evidence=f"{head}; {held.evidence}; with a copy naming it: "
                       f"{f.evidence}{extra}"), nums, curve
    both, curve, numbers = trial(joint([*base, pairs[best][0]]), n + 1)
    nums["together"] = numbers
    return replace(both, evidence=f"{head}; confirmed with a copy naming them all: "
                   f"{both.evidence}; the layers alone: {f.evidence}{extra}"), nums, curve


# Fewest fresh prompts worth a second held-out set.
FRESH_MIN = 4


def fresh_check(ctx: Context, method: str, loadable: Path, best: tuple[int, ...],
                served: tuple[int, ...] | None, lead: Lead) -> Finding | None:
    """The search's best set against the served one on prompts of the same suites that the
    diagnosis never measured (``common.fresh_prompts``), through the oracle: a second held-out
    set, for a choice its first held-out half did not decide. None when there are too few
    fresh prompts or nothing served to compare with."""
    from specdoctor.oracle.heads.search import aux_search

    fresh = common.fresh_prompts(ctx)
    if served is None or len(fresh) < FRESH_MIN or ctx.target_dir is None:
        return None
    ctx.progress(f"oracle counterfactual: {lead.field}, the best set on {len(fresh)} fresh "
                 "prompts")
    res = aux_search(method, ctx.target_dir, loadable, list(fresh), [best, served],
                     ctx.k or 3, ctx.max_tokens, ctx.tokenizer_dir)
    every = list(range(len(fresh)))
    f = rules.decide_gain(lead.hypothesis, f"on {len(fresh)} fresh prompts of the same suites",
                          rules.paired_gain(res.units(0, every), res.units(1, every)),
                          common.ceiling(ctx))
    return replace(f, evidence=f"{list(best)} against the served {list(served)} {f.evidence}")


def _as_searched(f: Finding, numbers: dict[str, float], top: float, held: Finding) -> Finding:
    """The held-out half confirmed the search's best set; the copy naming it (all prompts,
    through the oracle) must reproduce the search's figure for that set, and then the held-out
    verdict stands (the copy's own rule reads all prompts, half of them the ones it was chosen
    on). A copy that gives another figure leaves it open."""
    after = numbers.get("after")
    if after is not None and abs(after - top) <= 0.02 * max(top, 0.1):
        return replace(f, verdict=Verdict.CONFIRMED, recovered=held.recovered,
                       basis="counterfactual")
    got = "does not run" if after is None else f"gives {after:.3f}"
    return replace(f, verdict=Verdict.INCONCLUSIVE,
                   evidence=f"{f.evidence}; the copy {got} where the search gave {top:.3f}",
                   basis=None, unchecked=(f.evidence.split(":")[0],))


def searched_best(ctx: Context, lead: Lead, every: tuple[cmp.Candidate, ...]
                  ) -> list[cmp.Candidate]:
    """The set the oracle's search chose for ``lead`` and its held-out half left open (a lead
    ``layer_search`` left in the context), as a candidate to relaunch, marked ``SEARCHED``."""
    chosen = [x.value for x in ctx.leads if x.source == SEARCHED and x.field == lead.field
              and x.hypothesis == lead.hypothesis]
    return [replace(c, source=SEARCHED) for c in every
            if chosen and json.dumps(c.value) == json.dumps(chosen[-1])][:1]


class OracleCounterfactual:
    """Through the oracle: no restart, methods the oracle covers. Only where the engine reaches
    the oracle of the served files: otherwise the oracle does not read those files as the
    engine does, and what it shows after a change says nothing of the engine."""

    id = "oracle-counterfactual"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.method == "ngram":
            return "prompt lookup has no drafter config"
        gap = ctx.oracle_gap
        if gap is not None and gap.below:
            return ("the engine accepts less than the oracle of the served files, so the oracle "
                    "does not run them as the engine does; a relaunch decides")
        return oracle_unavailable(ctx)

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        r = review_for(ctx)
        found = [lead for lead in r.leads if lead.hypothesis in hypotheses]
        if not found or ctx.draft_dir is None:
            out = _no_leads(self.id, hypotheses, r, ctx.engine)
            if found:   # MTP: the layers live in the target's checkpoint
                out.findings = [Finding(x.hypothesis, Verdict.INCONCLUSIVE,
                                        f"{x.change()}: not tried (the drafter's config is the "
                                        "target's own)", unchecked=(x.change(),))
                                for x in found]
            elif ctx.draft_dir is not None and r.contract is not None:
                nums: dict[str, Any] = {}
                out.findings, curve = _with_space(ctx, r.contract, [], out.findings, nums)
                out.numbers["trials"] = nums
                if curve is not None:
                    out.curves["after the contract's space searched"] = curve
                out.wall_s = time.perf_counter() - t0
            return out
        from specdoctor.errors import SpecdoctorError

        try:
            base = served_oracle(ctx)
            before, broken = common.apd(expected_profile(base)), ""
        except SpecdoctorError as exc:   # the engine cannot run them either: nothing accepted
            base, before = None, 0.0
            broken = (f"; the served files do not run in the oracle ({exc}): none of their "
                      "drafts count")

        def trial(lead: Lead, n: int) -> Trial:
            ctx.progress(f"oracle counterfactual: {lead.change()}")
            try:
                after = expected_profile(run_oracle(ctx, 0.0, 1.0, patched_copy(
                    ctx.draft_dir, lead, ctx.workdir, n)))
            except SpecdoctorError as exc:
                return (Finding(lead.hypothesis, Verdict.EXCLUDED, f"{lead.change()} (oracle): "
                                f"the changed copy does not run either ({exc})"), None, {})
            a = common.apd(after)
            top = common.ceiling(ctx)
            f = rules.decide_counterfactual(lead.hypothesis, lead.change() + f" (oracle{broken})",
                                            before, a, top,
                                            significant=rules.oracle_change_is_real(before, a, top))
            return f, after, {"before": round(before, 4), "after": round(a, 4)}

        won: dict[str, dict[str, Lead]] = {}   # the changes that recovered alone

        def noted(lead: Lead, n: int) -> Trial:
            out = trial(lead, n)
            if out[0].verdict is Verdict.CONFIRMED and " + " not in lead.field:
                won.setdefault(lead.hypothesis, {})[lead.field] = lead
            return out

        plain = [x for x in found if not x.search and x.oracle_reads is not False]
        tried, curves, nums = search(plain, hypotheses, noted, always_alone=True)
        for i, lead in enumerate(x for x in found if x.search):
            default = r.contract.aux.default if r.contract and r.contract.aux else None
            fixed = tuple(won.get(lead.hypothesis, {}).values())
            f, numbers, curve = layer_search(ctx, lead, trial, 300 + 50 * i, default, fixed)
            nums[f"search {lead.field}"] = numbers
            if curve is not None:
                curves[f"after {lead.field} searched"] = curve
            if fixed and f.verdict is Verdict.CONFIRMED:   # one finding naming every field
                alone = [x for x in tried if x.hypothesis == lead.hypothesis
                         and x.verdict is Verdict.CONFIRMED]
                tried = [x for x in tried if x.hypothesis != lead.hypothesis
                         or x.verdict is not Verdict.CONFIRMED]
                f = combined(lead.hypothesis, f, alone)
            elif f.verdict is Verdict.INCONCLUSIVE:   # a set left open is said beside a cause
                tried = [replace(x, evidence=f"{x.evidence}; also open: {f.evidence}",
                                 unchecked=(*x.unchecked, *f.unchecked))
                         if x.hypothesis == lead.hypothesis and x.verdict is Verdict.CONFIRMED
                         else x for x in tried]
            tried.append(f)
        for lead in found:
            if lead.oracle_reads is False and not lead.search:
                tried.append(Finding(lead.hypothesis, Verdict.INCONCLUSIVE,
                                     f"{lead.change()}: the oracle does not read {lead.field} "
                                     f"(vLLM does), so it would show no change; a relaunch "
                                     f"decides", unchecked=(lead.change(),)))
        merged = rules.one_per_hypothesis(_verdicts(hypotheses, tried, r), evidence="decisive")
        if base is not None and r.contract is not None and not any(
                f.verdict is Verdict.CONFIRMED for f in merged if f.hypothesis in HYPOTHESES):
            merged, curve = _with_space(ctx, r.contract, found, merged, nums)
            if curve is not None:
                curves["after the contract's space searched"] = curve
        return ExperimentResult(self.id, merged, {**r.numbers(), "trials": nums},
                                {**({"before": expected_profile(base)} if base else {}),
                                 **curves},
                                wall_s=time.perf_counter() - t0)


def _with_space(ctx: Context, contract: contract_mod.Contract, found: list[Lead],
                merged: list[Finding], nums: dict[str, Any]) -> tuple[list[Finding], Any]:
    """No reference lead recovered: the contract's space searched through the oracle
    (``space_search``). A change it confirms is a cause of its own kind (a mask or another
    config key); what it leaves undecided is said in draft-config-mismatch's evidence."""
    if ctx.engine not in (None, "vllm"):
        nums["space"] = {"not_searched": f"the contract is what {contract.engine} reads; the "
                                         f"server is {ctx.engine}, which reads its drafter "
                                         "otherwise"}
        return merged, None
    tried = frozenset(e[0] for x in found for e in x.config_edits())
    try:
        out = space_search.search(ctx, contract, tried)
    except SpecdoctorError as exc:   # the served files do not run in the oracle: no baseline
        nums["space"] = {"not_searched": f"the served files do not run in the oracle ({exc})"}
        return merged, None
    nums["space"] = out.numbers
    f = out.finding
    if f is None:
        return merged, None
    if f.verdict is not Verdict.CONFIRMED:
        # the space adds its evidence, not a verdict: its best of many changes left undecided
        # on held-out prompts is no lead (a change can raise a healthy drafter a little)
        return [replace(x, evidence=f"{x.evidence}; {f.evidence}")
                if x.hypothesis == "draft-config-mismatch" else x for x in merged], None
    return rules.one_per_hypothesis([*merged, f], evidence="decisive"), out.curve


class RelaunchCounterfactual:
    """Relaunch the user's command with the drafter copy: any method the engine serves. A
    search over layer sets needs the oracle (one relaunch per set is out of reach): the set the
    oracle's search chose and left open (``SEARCHED``) and the structured candidates (vLLM's
    default, training metadata, the other convention) are relaunched; the rest is said not to
    have been checked."""

    id = "relaunch-counterfactual"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.launch is None or ctx.launcher is None:
            return "needs a launch command (diagnose --launch '...', or the lab)"
        if ctx.draft_dir is None:
            return "the drafter has no directory of its own (ngram, mtp)"
        if ctx.measured.greedy is None:
            return "no greedy measurement to compare with"
        return None

    def without_running(self, ctx: Context, hypotheses: tuple[str, ...]
                        ) -> ExperimentResult | None:
        """Where the relaunch cannot run (an engine that reads its drafter from files no copy
        stands for): a drafter whose contract names no lead has nothing to relaunch for, and
        that answer needs no relaunch (``_no_leads``); None where a lead would need one."""
        if ctx.draft_dir is None:
            return None
        r = review_for(ctx)
        if r.contract is None or any(x.hypothesis in hypotheses for x in r.leads):
            return None
        return _no_leads(self.id, hypotheses, r, ctx.engine)

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        r = review_for(ctx)
        found = [lead for lead in r.leads if lead.hypothesis in hypotheses]
        if not found:
            return _no_leads(self.id, hypotheses, r, ctx.engine)
        assert ctx.launch is not None and ctx.draft_dir is not None
        plain: list[Lead] = []
        skipped: list[Finding] = []
        for lead in found:
            if not lead.search:
                plain.append(lead)
                continue
            every = (cmp.Candidate(lead.value, lead.source, lead.edits), *lead.alternatives)
            options = [*searched_best(ctx, lead, every),
                       *(c for c in every if c.source != "search")]
            if options:
                plain.append(replace(lead.trying(options[0]), alternatives=tuple(options[1:]),
                                     search=False))
            else:
                skipped.append(Finding(lead.hypothesis, Verdict.INCONCLUSIVE,
                                       f"{lead.field}: not checked — {lead.why}; the search "
                                       "over layer sets runs through the oracle",
                                       unchecked=(f"{lead.field} (the other layer sets)",)))
        before_p = ctx.measured.greedy.total
        before = common.apd(before_p)
        cmds: list[str] = []
        errors: list[str] = []

        def trial(lead: Lead, n: int) -> Trial:
            assert ctx.launch is not None and ctx.draft_dir is not None
            copy = patched_copy(ctx.draft_dir, lead, ctx.workdir, 100 + n)
            launch = ctx.launch.with_speculative(drafter=str(copy))
            cmds.append(launch.shell_command())
            m, _log, err = common.measure_launch(ctx, launch, common.params(ctx),
                                                 f"counterfactual-{n}")
            if m is None or m.total is None:
                errors.append(f"{lead.change()}: {err}")
                return (Finding(lead.hypothesis, Verdict.INCONCLUSIVE,
                                f"{lead.change()}: relaunch failed: {err}"), None, {})
            a = common.apd(m.total)
            after_u, before_u = common.units(m), common.units(ctx.measured.greedy)
            if lead.source == SEARCHED and after_u is not None and before_u is not None \
                    and after_u.shape[0] == before_u.shape[0]:
                # the oracle search's best, not decided on its held-out half: three ways
                f = rules.decide_gain(lead.hypothesis, lead.change() + " (relaunched)",
                                      rules.paired_gain(after_u, before_u), common.ceiling(ctx))
                return f, m.total, {"before": round(before, 4), "after": round(a, 4)}
            f = rules.decide_counterfactual(
                lead.hypothesis, lead.change() + " (relaunched)", before, a, common.ceiling(ctx),
                common.significantly_higher(m.total, before_p))
            return f, m.total, {"before": round(before, 4), "after": round(a, 4)}

        def more() -> bool:
            deadline = ctx.deadline
            return deadline is None or time.monotonic() + RELAUNCH_MIN * 60 < deadline

        tried, curves, nums = search(plain, hypotheses, trial, more)
        merged = rules.one_per_hypothesis(_verdicts(hypotheses, tried + skipped, r),
                                          evidence="decisive")
        return ExperimentResult(self.id, merged, {**r.numbers(), "trials": nums},
                                {"before": before_p, **curves}, cmds,
                                "; ".join(errors) or None, time.perf_counter() - t0)
