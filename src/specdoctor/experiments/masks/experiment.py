"""The drafter's attention mask, bit by bit, as a verdict experiment of ``specdoctor diagnose``
(catalogue id ``masks``, hypothesis ``attention-mask``).

What it does: take the mask every draft layer is served with (``served``: the live engine's,
else the engine's own config functions', else the config's) and the backend that applies it,
and compare it with the mask the drafter trains with:

- the method's own mask: a DFlash drafter predicts its block with non-causal attention and no
  window unless its config says otherwise; every other drafter attends causally with the window
  its own config states (it was trained with that config). A served causality or window the
  method's own mask does not have is a lead, naming the config field the counterfactual resets
  (``dflash_config.causal``, ``is_causal``, ``dflash_config.use_swa``, ``layer_types``);
- the backend's convention: for a windowed layer, the served backend's mask model
  (``backends``, read from the engine's code) against the convention a window is trained with
  (transformers: a key is visible when q − k < W), cell by cell over the contexts around the
  window's edge (``diff``); a difference is a lead (one key more or less at the edge). Where the
  served backend runs here (vLLM's CPU op), its real output is read back bit by bit as well
  (``check``), so the model is checked against the op.

Excluded only when every draft layer is served with the method's own mask and the backend
applies it as trained, bit for bit: the rule ``difference-not-verdict`` makes a difference a
lead (inconclusive) and the counterfactual (``counterfactual-only``) the one way to confirm.
The leads go to ``ctx.leads``.
"""

from __future__ import annotations

import time
from typing import Any

from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Lead, Verdict
from specdoctor.experiments.masks.backends import Resolved, resolve
from specdoctor.experiments.masks.cite import CodeRoot
from specdoctor.experiments.masks.model import Convention, MaskSpec
from specdoctor.experiments.masks.served import Served, served
from specdoctor.methods import LOOKUP_METHODS
from specdoctor.served_files import stated_masks

HID = "attention-mask"
# The convention a sliding window is trained with (transformers' masking_utils: a key is
# visible when q - k < W), bottom-right causal as every cached decode step is.
TRAINED = Convention("W", "symmetric", "<", "bottom-right")
PAGED = ("fa2", "flex", "triton")   # where the backend is unknown: every GPU backend
MARGIN = 8                          # contexts compared beyond the window's edge


def method_mask(method: str | None, stated_window: int | None) -> tuple[int | None, bool]:
    """The (window, causal) a drafter of this method trains with: DFlash's block is
    non-causal with no window; other drafters are causal, with their own config's window."""
    if method == "dflash":
        return None, False
    return stated_window, True


def departure_leads(method: str | None, cfg: dict[str, Any], n_layers: int) -> list[Lead]:
    """The config fields that give a DFlash drafter another mask than the method's own, each
    with the value that restores it (pure)."""
    if method != "dflash":
        return []
    out = []
    dc = cfg.get("dflash_config") or {}
    if cfg.get("is_causal") is not None and cfg["is_causal"]:
        out.append(Lead(HID, "is_causal", None, "is_causal makes every DFlash layer causal",
                        "masks", remove=True))
    if dc.get("causal"):
        out.append(Lead(HID, "dflash_config.causal", False,
                        "dflash_config.causal makes every DFlash layer causal", "masks"))
    if dc.get("use_swa"):
        out.append(Lead(HID, "dflash_config.use_swa", False,
                        "dflash_config.use_swa gives every DFlash layer a sliding window",
                        "masks"))
    if "sliding_attention" in (cfg.get("layer_types") or []):
        out.append(Lead(HID, "layer_types", ["full_attention"] * n_layers,
                        "layer_types gives some DFlash layers a window (and causality)", "masks"))
    return out


def _ctx_range(window: int, n: int, max_len: int | None) -> tuple[int, int]:
    hi = window + n + MARGIN
    if max_len is not None:
        hi = min(hi, max(0, max_len - n))
    return max(0, window - n - MARGIN), hi


def convention_diff(backend: str | None, spec: MaskSpec, n: int, max_len: int | None,
                    code: CodeRoot) -> tuple[list[str], list[str], list[Any]]:
    """(differences, what matched, citations) of the served backend's mask against the trained
    convention around the window's edge; every paged backend when the backend is unknown."""
    from specdoctor.experiments.masks.diff import diff_masks

    if spec.window is None:
        return [], ["no window: the backends' window conventions do not apply"], []
    lo, hi = _ctx_range(spec.window, n, max_len)
    trained = Resolved("trained", TRAINED, [], [])
    diffs, same, cites = [], [], []
    for impl in ([backend] if backend else PAGED):
        model = resolve(impl, spec, code)
        cites += [c for c in model.citations if c.found]
        d = diff_masks([model, trained], spec, lo, hi, n)
        if d.identical:
            same.append(f"{impl} = trained over ctx {lo}..{hi} (q {n})")
        else:
            diffs.append(f"{impl} ({model.convention.describe()}) vs trained: "
                         f"{d.pairs[0].summary(spec)}")
    return diffs, same, cites


def op_check(backend: str | None, spec: MaskSpec, n: int, max_len: int | None,
             code: CodeRoot) -> tuple[str | None, str | None]:
    """The served op's real mask read back against its model, where the op runs here:
    (what matched, what did not); (None, None) when it cannot run here."""
    from specdoctor.experiments.masks.check import check_ctxs, run_checks

    if backend != "cpu":
        return None, None
    lo, hi = (_ctx_range(spec.window, n, max_len) if spec.window is not None
              else (0, min(64, max(0, (max_len or 64) - n))))
    ctxs = check_ctxs(spec, lo, hi, n, limit=8)
    res = run_checks([resolve("cpu", spec, code)], spec, ctxs, n)[0]
    if not res.ran:
        return None, None
    if res.ok:
        return f"the cpu op read back on {len(res.ctxs)} contexts ({res.cells} cells): as its " \
               f"model", None
    cell = res.mismatches[0]
    return None, (f"the cpu op differs from its mask model on {len(res.mismatches)} cell(s) "
                  f"(first: ctx {cell['ctx']}, q {cell['q']}, k {cell['k']}: model "
                  f"{cell['model']}, op {cell['op']})")


def decide(s: Served, cfg: dict[str, Any], k: int | None, max_len: int | None,
           code: CodeRoot | None = None, run_op: bool = True
           ) -> tuple[Finding, list[Lead], dict[str, Any]]:
    """The attention-mask finding of the served masks (pure but for reading the engine's code,
    and the op check when ``run_op``)."""
    code = code or CodeRoot(None)
    n = (k or 1) + 1
    stated = stated_masks(cfg, s.method, len(s.draft)) if cfg else [(x.window, x.causal)
                                                                     for x in s.draft]
    leads: list[Lead] = []
    problems: list[str] = []
    fine: list[str] = []
    cites: list[Any] = []
    for (window, causal, backend), names in s.groups().items():
        i = next(j for j, x in enumerate(s.draft) if x.name == names[0])
        want = method_mask(s.method, stated[i][0] if i < len(stated) else None)
        where = f"{len(names)} draft layer(s) ({names[0]}{', …' if len(names) > 1 else ''})"
        served_text = _mask_text(window, causal)
        if (window, causal) != want:
            problems.append(f"{where} served {served_text}, {s.method or 'the drafter'} trains "
                            f"with {_mask_text(*want)}")
            continue
        spec = MaskSpec(window, causal)
        diffs, same, c = convention_diff(backend, spec, n, max_len, code)
        cites += c
        ok_op, bad_op = op_check(backend, spec, n, max_len, code) if run_op else (None, None)
        if diffs or bad_op:
            problems += [f"{where} ({served_text}): {d}" for d in diffs]
            if bad_op:
                problems.append(f"{where}: {bad_op}")
            if diffs and window is not None:
                leads.append(Lead(HID, "sliding_window", window - 1, "the served backend sees "
                                  "one key more at the window's edge than training did", "masks"))
            continue
        fine.append(f"{where}: {served_text} on {backend or 'any paged backend'}; "
                    + "; ".join(same + ([ok_op] if ok_op else [])))
    if problems:
        leads = departure_leads(s.method, cfg, len(s.draft)) + leads
        named = f"; counterfactual: {', '.join(x.field for x in leads)}" if leads else ""
        return (Finding(HID, Verdict.INCONCLUSIVE,
                        f"masks from {s.source}, backend from {s.backend_source}: "
                        + "; ".join(problems) + named + ": a lead, not a verdict",
                        citations=_cite(cites)), leads, {"problems": problems, "fine": fine})
    return (Finding(HID, Verdict.EXCLUDED,
                    f"masks from {s.source}, backend from {s.backend_source}: every draft layer "
                    f"is served with the mask {s.method or 'the drafter'} trains with, as trained, "
                    f"bit for bit: " + "; ".join(fine), citations=_cite(cites)),
            [], {"problems": [], "fine": fine})


def _mask_text(window: int | None, causal: bool) -> str:
    return (f"{'causal' if causal else 'non-causal'}, "
            f"{'window ' + str(window) if window is not None else 'no window'}")


def _cite(cites: list[Any]) -> tuple[dict[str, str], ...]:
    out: dict[str, dict[str, str]] = {}
    for c in cites:
        out.setdefault(c.path, {"file": c.path, "sha256": str(c.sha256)})
    return tuple(out.values())


class Experiment:
    id = "masks"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.method in LOOKUP_METHODS:
            return None
        if ctx.draft_dir is None and not (ctx.method == "mtp" and ctx.target_dir is not None) \
                and ctx.engine_view is None:
            return "needs the drafter's directory (a launch command) to read its mask"
        return None

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        if ctx.method in LOOKUP_METHODS:
            return ExperimentResult(self.id, [Finding(HID, Verdict.EXCLUDED, f"{ctx.method} "
                                    "drafts by prompt lookup: no draft attention, no mask")])
        s = served(ctx)
        if s is None:
            return ExperimentResult(self.id, [Finding(HID, Verdict.INCONCLUSIVE,
                                    "the drafter's config could not be read")])
        cfg = common.configs(ctx)[0]
        max_len = ctx.settings.max_model_len if ctx.settings is not None else None
        f, leads, nums = decide(s, cfg, ctx.k, max_len)
        ctx.leads.extend(leads)
        nums.update({"source": s.source, "backend_source": s.backend_source,
                     "layers": [vars(x) for x in s.draft], "notes": s.notes,
                     "leads": [x.to_json() for x in leads]})
        cmds = [f"specdoctor masks diff --impl {x.backend or 'fa2,flex,triton'} --window "
                f"{x.window} --causal {str(x.causal).lower()} --check"
                for x in s.draft if x.window is not None][:1]
        return ExperimentResult(self.id, [f], nums, commands=cmds,
                                wall_s=time.perf_counter() - t0)
