"""Drafters that read the target's hidden states — EAGLE3, DFlash, MTP — for the lab.

Random-weight drafters accept nothing, so no fault can be seen on them. Each method here has:

- a **trained** drafter: a head trained against a trained target on that target's own greedy
  text, deterministic from its recipe, built once and cached (``eagle3.trained()``, …);
- hand-wired **controls** on the control target (``cycle``), whose greedy text is known, so a
  drafter can be built right or wrong exactly where wanted: their profile is designed, and a
  server that measures anything else has a broken measurement path.

``serve(method, control=…)`` resolves what a lab server runs: target, drafter, tokenizer
(``lab.faults.serve`` the same with a fault applied). One module per method holds that
method's config, tensors, reference forward (what training differentiates), training and
controls. What a server will measure is predicted by
the oracle from the served checkpoint (``offline.predict``), not by this training code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from specdoctor.errors import LabError

METHODS = ("eagle3", "dflash", "mtp")
# The k each trained drafter is served at by default. EAGLE3 and DFlash are trained for it
# (unrolled, or with a block of that many masks); the MTP layer is trained for one step and run
# recursively for the second, as MTP is deployed.
TRAINED_K = {"eagle3": 3, "dflash": 3, "mtp": 2}


@dataclass(frozen=True)
class Control:
    method: str
    name: str
    about: str
    designed: Callable[[int], list[float]]  # k → designed unconditional per-position rates


def _pos0(k: int) -> list[float]:
    return [1.0] + [0.0] * (k - 1)


def _perfect(k: int) -> list[float]:
    return [1.0] * k


CONTROLS: dict[str, dict[str, Control]] = {
    "eagle3": {
        "pos0": Control("eagle3", "pos0", "right at the first draft, wrong after it", _pos0),
        "perfect": Control("eagle3", "perfect", "right at every draft", _perfect),
    },
    "dflash": {
        "pos0": Control("dflash", "pos0", "right at the first masked position, wrong after it",
                        _pos0),
    },
    "mtp": {
        "pos0": Control("mtp", "pos0",
                        "right at its first step, wrong at every recursive step", _pos0),
        "perfect": Control("mtp", "perfect", "right at every recursive step", _perfect),
    },
}


@dataclass(frozen=True)
class Served:
    """What one lab server of a drafter method runs."""

    method: str
    target: Path
    draft: Path | None  # None for MTP: its layers are in the target's checkpoint
    tokenizer: Path
    tags: tuple[str, ...] = ()  # for the server's label: what is served, never a fault
    fault: str | None = None  # the lab's own knowledge, kept out of everything served


def module(method: str) -> ModuleType:
    if method == "eagle3":
        from specdoctor.lab.drafters import eagle3 as m
    elif method == "dflash":
        from specdoctor.lab.drafters import dflash as m
    elif method == "mtp":
        from specdoctor.lab.drafters import mtp as m
    else:
        raise LabError(f"no drafter method {method!r}", f"choose one of: {', '.join(METHODS)}")
    return m


def control(method: str, name: str) -> Control:
    try:
        return CONTROLS[method][name]
    except KeyError:
        names = ", ".join(CONTROLS.get(method, {})) or "none"
        raise LabError(f"no control {name!r} for {method}", f"controls of {method}: {names}") from None


def serve(method: str, *, control: str | None = None, budget: str = "full",
          target: Path | None = None, draft: Path | None = None) -> Served:
    """Target, drafter and tokenizer of a healthy lab server (building what is missing)."""
    from specdoctor.lab.drafters import targets

    m = module(method)
    tags: tuple[str, ...] = ()
    if control is not None:
        globals()["control"](method, control)  # validate the name first
        t, d = m.control(control)
        tags = (f"control={control}",)
    elif target is None or (draft is None and method != "mtp"):
        t, d = m.trained_pair(budget)
        tags = (f"trained={budget}",) if budget != "full" else ("trained",)
    else:
        t, d = target, draft
    return Served(method, target or t, draft or d, targets.tokenizer_dir(), tags)
