"""What a person reads of a gate: the verdict first, each regression with both intervals and
the command that reproduces it, what moved within noise, then every test in one table."""

from __future__ import annotations

from collections.abc import Sequence

from specdoctor.gate.compare import (
    CHANGED, DROP_ALLOWED, IMPROVED, MIN_POSITION_RATE, NOISE, PAIRED, RARE, REGRESSED, UNTESTED,
    Comparison, Estimate, Sensitivity, Test,
)
from specdoctor.gate.run import BAD_INPUT, FAIL, PASS, GateResult


def figure_name(figure: str) -> str:
    if figure == "mean_acceptance_length":
        return "mean acceptance length"
    if figure == "speedup":
        return "speedup over spec-off"
    return figure  # per_position[i]: the unconditional rate at position i (0-based)


def estimate(e: Estimate | None, digits: int = 3) -> str:
    if e is None:
        return "—"
    if not e.has_interval:
        return f"{e.value:.{digits}f} [no interval]"
    return f"{e.value:.{digits}f} [{e.low:.{digits}f}, {e.high:.{digits}f}]"


def change(t: Test) -> str:
    return "—" if t.change is None else f"{t.change * 100:+.1f}%"


def p_text(t: Test) -> str:
    if t.p is None:
        return "—"
    return "p < 1e-6" if t.p < 1e-6 else (f"p {t.p:.2g}" if t.p < 0.01 else f"p {t.p:.2f}")


def one_line(t: Test) -> str:
    """``cell figure: baseline [95%] → candidate [95%] (change, p, Holm level)``"""
    level = f", Holm level {t.threshold:.2g}" if t.threshold is not None else ""
    how = f", {t.method.describe()}" if t.p is not None else ""
    return (f"{t.cell} {figure_name(t.figure)}: {estimate(t.base)} → {estimate(t.cand)} "
            f"({change(t)}, {p_text(t)}{how}{level})")


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%".replace(".0%", "%")


FIGURES = (("mean acceptance length", lambda f: f == "mean_acceptance_length"),
           ("per-position rates", lambda f: f.startswith("per_position[")),
           ("speedup over spec-off", lambda f: f == "speedup"))


def sensitivity_lines(cmp: Comparison, requests: int | None = None) -> list[str]:
    """One line per figure: the smallest drop the gate would catch in every cell where it
    catches one, with the cells it cannot catch one in and why."""
    if not cmp.sensitivity:
        return []
    level = cmp.sensitivity[0].level
    size = f"{requests} requests a cell" if requests else "this baseline's requests"
    out = [f"sensitivity (a drop injected evenly into the candidate's requests, tested as above "
           f"at Holm's strictest level {level:.2g}; a regression must also exceed the allowed "
           f"{_pct(cmp.max_drop)}):"]
    for name, match in FIGURES:
        xs = [x for x in cmp.sensitivity if match(x.figure)]
        if not xs:
            why = ("the baseline has no spec-off measurement" if name.startswith("speedup")
                   else "no test of it")
            out.append(f"  {name}: not gated ({why})")
            continue
        out.append(f"  {name}: {_would_catch(xs, size, cmp.max_drop)}")
    return out


def _would_catch(xs: Sequence[Sensitivity], size: str, max_drop: float) -> str:
    changed = [x for x in xs if x.drop is None and x.why == CHANGED]
    xs = [x for x in xs if x not in changed]
    caught = [x for x in xs if x.drop is not None]
    blind = [x for x in xs if x.drop is None]
    if changed and not xs:
        return f"not measured ({CHANGED}, in every cell)"
    parts = []
    if caught:
        worst = max(caught, key=lambda x: x.drop or 0.0)
        best = min(caught, key=lambda x: x.drop or 0.0)
        x = worst.drop or 0.0
        head = f"would catch a drop of ≥ {_pct(max(x, max_drop))} at this baseline size ({size})"
        if x < max_drop:
            head += f" (significant from {_pct(x)}; the allowed drop is larger)"
        if best.drop != worst.drop:
            head += (f"; from {_pct(best.drop or 0.0)} in {_where(best)} to {_pct(x)} in "
                     f"{_where(worst)}")
        else:
            head += f"; {_pct(x)} in {_where(worst)}" + (
                f" and {len(caught) - 1} more" if len(caught) > 1 else "")
        parts.append(head)
    else:
        parts.append(f"would catch no drop at this baseline size ({size})")
    if blind:
        whys = sorted({x.why or "" for x in blind})
        parts.append(f"none in {', '.join(sorted({_where(x) for x in blind}))} "
                     f"({'; '.join(whys)})")
    if changed:
        parts.append(f"not measured in {len(changed)} where {CHANGED}")
    return "; ".join(parts)


def _where(x: Sensitivity) -> str:
    where = x.cell if x.figure in ("mean_acceptance_length", "speedup") else \
        f"{x.cell} {x.figure}"
    return f"{where} ({x.method.name})"


def render(res: GateResult) -> str:
    cmp = res.comparison
    tested = cmp.tested
    paired_n = sum(t.method.name == PAIRED for t in tested)
    how = (f"acceptance paired over the prompts both runs sent (sign-flip permutation) in "
           f"{paired_n} of {len(tested)} tests, the rest unpaired (MOVER)" if paired_n else
           "unpaired (MOVER)")
    lines = [_headline(res), f"baseline: {res.baseline.describe()} [{res.baseline_ref}]",
             f"candidate: {res.candidate.describe} (measured as bench run {res.run_id}; load "
             f"average {res.load.get('before', '?')} → {res.load.get('after', '?')})",
             f"tests: {len(tested)} (per cell: mean acceptance length, the rate at each position "
             f"the baseline accepts in ≥ {MIN_POSITION_RATE:.0%} of drafts"
             f"{', speedup over spec-off' if any(t.figure == 'speedup' for t in tested) else ''})"
             f", two-sided, {how}, family-wise false-alarm rate ≤ {cmp.alpha:g} (Holm); a "
             f"regression is a significant drop of more than {cmp.max_drop * 100:g}%"]
    lines += sensitivity_lines(cmp, res.params.num_prompts)
    if cmp.regressions:
        lines.append("")
        lines.append("regressed:")
        for t in cmp.regressions:
            lines.append(f"  {one_line(t)}")
        lines.append("reproduce:")
        for cell, cmd in res.reproduce.items():
            lines.append(f"  {cell}: {cmd}")
    lines += _others(res.comparison.tests, cmp.max_drop)
    for cell, why in res.failed_cells.items():
        lines.append(f"not measured: {cell}: {why}")
    for cell in cmp.missing:
        lines.append(f"not measured: {cell} (the candidate has no figures for it)")
    for n in res.notes:
        lines.append(f"note: {n}")
    if res.diagnosis is not None:
        lines.append("")
        lines += _diagnosis(res.diagnosis)
    lines.append("")
    lines += table(res.comparison.tests)
    return "\n".join(lines) + "\n"


def _headline(res: GateResult) -> str:
    cmp = res.comparison
    if res.exit_code == FAIL:
        n = len(cmp.regressions)
        cells = sorted({t.cell for t in cmp.regressions})
        return (f"gate: FAIL — {n} significant regression{'s' * (n != 1)} beyond the allowed "
                f"drop of {cmp.max_drop * 100:g}%, in {', '.join(cells)} (exit 1)")
    if res.exit_code == PASS:
        return (f"gate: PASS — no significant regression in {len(cmp.tested)} tests of "
                f"{len({t.cell for t in cmp.tested})} cells (exit 0)")
    if res.exit_code == BAD_INPUT:
        return "gate: BAD INPUT — the candidate cannot be compared with this baseline (exit 2)"
    return "gate: NOT MEASURED — the candidate could not be measured in every cell (exit 3)"


def _others(tests: Sequence[Test], max_drop: float) -> list[str]:
    out = []
    noise = [t for t in tests if t.outcome == NOISE]
    if noise:
        big = max(noise, key=lambda t: abs(t.change or 0.0))
        out.append(f"within noise: {len(noise)} of {len([t for t in tests if t.p is not None])}"
                   f" tests; the largest change: {one_line(big)}")
        for t in noise:
            if t is not big and abs(t.change or 0.0) > max_drop:
                out.append(f"within noise: {one_line(t)}")
    for t in tests:
        if t.outcome == DROP_ALLOWED:
            out.append(f"significant, within the allowed drop: {one_line(t)}")
        elif t.outcome == IMPROVED:
            out.append(f"improved: {one_line(t)}")
    rare = [t for t in tests if t.outcome == RARE]
    if rare:
        out.append(f"not gated (rare): {len(rare)} per-position rates where the baseline "
                   f"accepts in under {MIN_POSITION_RATE:.0%} of its drafts (in the table)")
    untested = [t for t in tests if t.outcome == UNTESTED]
    if untested:
        why = sorted({t.why or "" for t in untested})
        out.append(f"not tested: {len(untested)} figures ({'; '.join(why)})")
    return out


def _diagnosis(d: dict) -> list[str]:
    if "error" in d:
        return [f"diagnose: could not run ({d['error']})"]
    sig = d.get("signature") or {}
    und = d.get("undetermined") or {}
    lines = [f"diagnose: root cause {d.get('root_cause') or 'not determined'}"
             + (f" (basis: {d['root_cause_basis']})" if d.get("root_cause_basis") else "")
             + (f" (these remain: {', '.join(und['candidates'])})"
                if not d.get("root_cause") and und.get("candidates") else "")
             + (f" (also: {', '.join(d['other_causes'])})" if d.get("other_causes") else ""),
             f"  signature: {sig.get('class')} — {sig.get('evidence')}"]
    if d.get("report"):
        lines.append(f"  report: {d['report']}")
    if d.get("investigation") is not None:
        lines.append(f"  ledger: specdoctor ledger show {d['investigation']}")
    return lines


def table(tests: Sequence[Test]) -> list[str]:
    """Every test: cell, figure, baseline and candidate with their 95% intervals, change, p,
    Holm level and outcome."""
    head = ("cell", "figure", "baseline [95%]", "candidate [95%]", "change", "p", "test",
            "Holm level", "outcome")
    rows = [head] + [(t.cell, figure_name(t.figure), estimate(t.base), estimate(t.cand),
                      change(t), "—" if t.p is None else f"{t.p:.2g}",
                      "—" if t.p is None else (f"paired {t.method.pairs}"
                                               if t.method.name == PAIRED else "unpaired"),
                      "—" if t.threshold is None else f"{t.threshold:.2g}",
                      REGRESSED.upper() if t.outcome == REGRESSED else t.outcome)
                     for t in tests]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
