"""Reference profiles: what "low" is measured against, each with its convention, converted first.

A reference is one of (in order of preference):
1. ``oracle``: computed from the served weights on the same prompts (``specdoctor.oracle``);
2. ``user``: a JSON file the user gives (``--reference FILE``);
3. ``published``: a built-in table of published figures (below), each with its source and
   convention;
4. ``self``: the same server at k=1, greedy (position 0 at k=1 bounds position 0 at any k).

Conventions are converted before any comparison, here (with the conversions of
``acceptance.compare``) and nowhere else:
- mean acceptance length with the bonus token (vLLM, SGLang ``accept len``) or without it
  (accepted draft tokens per step, how Case A's 0.75 reads);
- per-position rates unconditional (accepted at i / drafts, vLLM's) or conditional
  (i given i-1); conditional ones are turned unconditional by cumulative products;
- k: SGLang's ``--speculative-num-draft-tokens`` counts the root token, so its N is vLLM's
  k = N - 1 for chain drafting.

A published figure is for the model, drafter and prompts it was measured on. It is matched on
each of them that it states (``Published.model``, ``drafter_layers``, ``dataset``) against
what is known of the server (``Served``): a figure that names a model family is used only for
a server of that family (named by the launch command, the start-up log or the model's
directory), one that names a drafter size (an MTP head's layer count) only for that size, one
that names a dataset not for prompts known to be another (specdoctor's own suites). Where no
figure matches, the symptom is ``unreferenced`` and the reason says what the figures are for.

A reference is for one k. A published figure is used only for the k of the server measured
(the k its log shows, or the user gives): cut to its first k positions when it states more,
compared on the positions it states when it states fewer, and not at all when that k is
unknown. A figure published as a mean acceptance length only holds for its own k, and its
per-position shape is not known: it is compared on the total only (``shape_stated``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdoctor.acceptance.compare import (  # noqa: F401 - the conversions, read here too
    conditional_from_unconditional, unconditional_from_conditional,
)
from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.errors import InputError

if TYPE_CHECKING:
    from specdoctor.experiments.base import Context
from specdoctor.textfile import MAX_CONFIG, read_limited

SOURCES = ("oracle", "user", "published", "self", "counterfactual")


@dataclass(frozen=True)
class Reference:
    """Unconditional per-position rates (vLLM's convention) and where they come from."""

    name: str
    source: str  # one of SOURCES
    per_position: tuple[float, ...]
    citation: str = ""
    # Only the positions a reference states are compared; published figures are for their own
    # model and data, so they bound "is this far off?" loosely (see ``tolerance``).
    tolerance: float = 0.10
    notes: tuple[str, ...] = field(default=(), compare=False)
    # False when only a mean was given: ``per_position`` is then an assumed spread with the
    # same total, to be compared on the total (accepted per draft) only.
    shape_stated: bool = True

    @property
    def k(self) -> int:
        return len(self.per_position)

    def words(self) -> str:
        """How the evidence names it: source, name and the k it is for."""
        return f"{self.source} reference {self.name} at k={self.k}"

    @property
    def accepted_per_draft(self) -> float:
        """Accepted draft tokens per step, bonus token NOT counted."""
        return float(sum(self.per_position))

    @property
    def mean_acceptance_length(self) -> float:
        """Bonus token counted (vLLM's figure)."""
        return 1.0 + self.accepted_per_draft

    def conditional(self) -> list[float | None]:
        return conditional_from_unconditional(self.per_position)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source,
                "per_position": [round(x, 4) for x in self.per_position],
                "convention": "unconditional per-position rates; mean acceptance length "
                              "counts the bonus token",
                "mean_acceptance_length": round(self.mean_acceptance_length, 4),
                "citation": self.citation, "tolerance": self.tolerance, "notes": list(self.notes),
                "k": self.k, "shape_stated": self.shape_stated}


# -- conversions (pure) --------------------------------------------------------------------------

def accepted_per_draft(mean_length: float, bonus_counted: bool) -> float:
    """Accepted draft tokens per step (no bonus) from a mean acceptance length."""
    return mean_length - 1.0 if bonus_counted else mean_length


def k_from_sglang_draft_tokens(num_draft_tokens: int) -> int:
    """SGLang's --speculative-num-draft-tokens counts the root: chain drafting k = N - 1."""
    if num_draft_tokens < 2:
        raise InputError(f"SGLang num_draft_tokens {num_draft_tokens} drafts nothing",
                         "it counts the root token: use 2 or more")
    return num_draft_tokens - 1


def reference_from_profile(profile: AcceptanceProfile, name: str, source: str,
                           citation: str = "", tolerance: float = 0.10) -> Reference | None:
    pp = profile.per_position
    if pp is None:
        return None
    return Reference(name, source, tuple(pp), citation, tolerance, profile.notes)


def cut_to(ref: Reference, k: int) -> Reference:
    """The reference's first k positions (its own when it states k or fewer)."""
    if ref.k <= k:
        return ref
    return replace(ref, name=f"{ref.name}, its first {k} of {ref.k} positions",
                   per_position=ref.per_position[:k])


def self_reference(k1_profile: AcceptanceProfile, k: int) -> Reference | None:
    """The same server at k=1, greedy: its position-0 rate is the best any position 0 can do,
    and a correct chain can only keep or lower the conditional rate (an upper bound only)."""
    pp = k1_profile.per_position
    if not pp:
        return None
    return Reference("self k=1", "self", (pp[0],), "the same server at k=1, greedy",
                     notes=(f"only position 0 is bounded; the run has k={k}",))


# -- published figures ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Published:
    name: str
    method: str
    k: int
    citation: str
    per_position: tuple[float, ...] | None = None   # as published
    conditional: bool = False                        # per_position published conditional
    mean_length: float | None = None
    bonus_counted: bool = True
    k_stated: bool = True   # False: the source does not state k; ``k`` is an assumption
    # What the figure was measured on, where its source says: the target's family (a key of
    # ``FAMILIES``), the drafter's size (an MTP head's layers), the prompts' dataset.
    model: str | None = None
    drafter_layers: int | None = None
    dataset: str | None = None

    def measured_on(self) -> str:
        """What the figure is for, in words."""
        parts = [self.model or "", f"{self.drafter_layers}-layer {self.method}"
                 if self.drafter_layers else "", f"on {self.dataset}" if self.dataset else ""]
        return " ".join(p for p in parts if p) or "any model"

    def mismatch(self, served: Served) -> str | None:
        """Why this figure is not for ``served`` (None when every stated trait matches)."""
        if self.model is not None and served.family != self.model:
            return (f"the model is not known to be {self.model}" if served.family is None
                    else f"the model is {served.family}, not {self.model}")
        if self.drafter_layers is not None and served.drafter_layers != self.drafter_layers:
            return (f"the drafter's size is not known ({self.drafter_layers} layers in the "
                    "figure)" if served.drafter_layers is None else
                    f"the drafter has {served.drafter_layers} layer(s), not {self.drafter_layers}")
        if self.dataset is not None and served.dataset not in (None, self.dataset):
            return f"the prompts are {served.dataset}, not {self.dataset}"
        return None

    def reference(self) -> Reference:
        if self.per_position is not None:
            pp = (unconditional_from_conditional(self.per_position) if self.conditional
                  else list(self.per_position))
            notes: tuple[str, ...] = ()
        else:
            # Only a mean: spread it as a geometric decay with the same accepted per draft, and
            # say so; it bounds the total, not the shape.
            apd = accepted_per_draft(self.mean_length or 1.0, self.bonus_counted)
            pp = _geometric_with_sum(apd, self.k)
            notes = ("published as a mean acceptance length only; per-position shape assumed "
                     "geometric with the same total",)
        if not self.k_stated:
            notes += (f"the source does not state k; k={self.k} is assumed",)
        # Published figures are for other models and data: a loose 25% tolerance.
        return Reference(self.name, "published", tuple(pp), self.citation, 0.25, notes,
                         shape_stated=self.per_position is not None)


def _geometric_with_sum(total: float, k: int) -> list[float]:
    """r, r^2, ..., r^k with the given sum (bisection; total is capped at k)."""
    total = min(max(total, 0.0), float(k))
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid ** (i + 1) for i in range(k)) < total:
            lo = mid
        else:
            hi = mid
    return [lo ** (i + 1) for i in range(k)]


# Model families the figures name, as a served model's name or path spells them.
FAMILIES = {
    "llama-3.1-8b": re.compile(r"llama[-_ .]?3\.1[-_ .]?8b", re.IGNORECASE),
    "qwen3-8b": re.compile(r"qwen[-_ ]?3[-_ .]?8b(?![\d.])", re.IGNORECASE),
}


@dataclass(frozen=True)
class Served:
    """What is known of the server a figure would be compared with; None where unknown."""

    family: str | None = None          # a key of FAMILIES
    drafter_layers: int | None = None  # an MTP head's layer count
    dataset: str | None = None         # the prompts' dataset, where known

    @staticmethod
    def of(names: Sequence[str | Path | None], configs: Sequence[Path | None] = (),
           dataset: str | None = None) -> Served:
        """From the model names or paths the server is known by (the first that names a
        family wins) and the model directories whose config.json states an MTP layer count."""
        family = next((f for n in names if n for f, rx in FAMILIES.items()
                       if rx.search(str(n))), None)
        layers = next((x for c in configs if c is not None
                       for x in (_mtp_layers(c),) if x is not None), None)
        return Served(family, layers, dataset)


# config.json keys that state how many MTP layers a model carries (DeepSeek-V3/GLM, Qwen3-Next,
# MiMo), the drafter of the mtp method.
MTP_LAYER_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers")


def _mtp_layers(model_dir: Path) -> int | None:
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    for key in MTP_LAYER_KEYS:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def served_of(ctx: Context) -> Served:
    """What a diagnosis' context knows of the server: its model's name (the launch command's,
    the start-up log's, the model directory's), its MTP layers (the draft's or target's
    config.json), and the dataset where specdoctor chose the prompts (its own suites)."""
    names: list[str | Path | None] = [ctx.settings.target if ctx.settings else None,
                                      ctx.target_dir]
    for log in ctx.logs:
        names.append(_startup_model(log))
    configs = [ctx.draft_dir, ctx.target_dir]
    dataset = f"specdoctor's {ctx.suite} prompts" if ctx.measured else None
    return Served.of(names, configs, dataset)


def _startup_model(log: str | Path) -> str | None:
    from specdoctor.sources.vllm_startup import startup_config

    try:
        found = startup_config(str(log))
    except OSError:
        return None
    return found.model if found is not None else None


PUBLISHED: tuple[Published, ...] = (
    Published("llama3.1-8b-eagle3-mtbench", "eagle3", 3,
              "vLLM CI tests/v1/spec_decode/test_acceptance_length.py, MT-Bench, greedy",
              per_position=(0.730, 0.521, 0.355), model="llama-3.1-8b", dataset="MT-Bench"),
    Published("qwen3-8b-eagle3-mtbench", "eagle3", 3,
              "vLLM CI tests/v1/spec_decode/test_acceptance_length.py, MT-Bench, greedy",
              per_position=(0.654, 0.399, 0.202), model="qwen3-8b", dataset="MT-Bench"),
    # The PR's own serve command sets num_speculative_tokens 8 (MT-Bench, batch size 1): the
    # figure holds at k=8 only, not at the k=3 a shallower server runs.
    Published("qwen3-8b-dflash-mtbench", "dflash", 8,
              "vLLM PR #32206, MT-Bench, greedy, batch size 1 (AL 2.93, bonus counted; "
              "num_speculative_tokens 8 in its serve command)",
              mean_length=2.93, bonus_counted=True, model="qwen3-8b", dataset="MT-Bench"),
    Published("mtp-8layer-gsm8k", "mtp", 8, "vLLM PR #48892, GSM8K greedy",
              per_position=(0.76, 0.62, 0.51, 0.42, 0.36, 0.31, 0.27, 0.24), drafter_layers=8,
              dataset="GSM8K"),
    # Spec-Bench's evaluation/inference_pld.py drafts up to 10 tokens (draft_num_candidate_tokens
    # 10, n-grams up to 3): the figure holds at k=10 only.
    Published("prompt-lookup-specbench", "ngram", 10,
              "Spec-Bench prompt lookup, 1.67-1.75 mean accepted tokens (bonus counted; up to "
              "10 draft tokens, n-grams up to 3, in its evaluation/inference_pld.py)",
              mean_length=1.67, bonus_counted=True, dataset="Spec-Bench"),
)


def published_for(method: str | None, k: int | None, served: Served | None = None
                  ) -> Reference | None:
    """The published figure for this method at this k, measured on what this server is
    (``served``: each trait the figure states must match; unknown matches nothing), or None."""
    return _published(method, k, served)[0]


def why_no_published(method: str | None, k: int | None, served: Served | None = None
                     ) -> str | None:
    """Why no published figure applies (None when one does): what the user can give."""
    return _published(method, k, served)[1]


def _published(method: str | None, k: int | None, served: Served | None
               ) -> tuple[Reference | None, str | None]:
    served = served or Served()
    figures = [p for p in PUBLISHED if p.method == method]
    if method is None:
        return None, "the method is unknown"
    if not figures:
        return None, f"no published figures for {method}"
    fitting = [p for p in figures if p.mismatch(served) is None]
    if not fitting:
        return None, (f"the published {method} figures are for "
                      + "; ".join(f"{p.measured_on()} ({p.mismatch(served)})" for p in figures))
    if k is None:
        return None, (f"k is unknown, and a published figure is for one k (the {method} "
                      f"figure is for k={fitting[0].k})")
    for p in fitting:
        if p.per_position is not None:
            return cut_to(p.reference(), k), None
        if p.k == k:
            return p.reference(), None
    return None, (f"the published {method} figure is a mean for k={fitting[0].k} only; this "
                  f"server has k={k}")


def load_user_reference(path: Path) -> Reference:
    """A user's reference file: ``{"per_position": [...], "conditional": false}`` or
    ``{"mean_acceptance_length": 2.6, "bonus_counted": true, "k": 3}``."""
    try:
        data = json.loads(read_limited(path, "reference file", MAX_CONFIG, "--reference"))
    except OSError as exc:
        raise InputError(f"cannot read the reference file {path}: {exc}", "check the path") from exc
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path} is not JSON: {exc}",
                         'write e.g. {"per_position": [0.7, 0.5, 0.35]}') from exc
    if not isinstance(data, dict):
        raise InputError(f"{path} must hold a JSON object", 'e.g. {"per_position": [0.7, 0.5]}')
    try:
        if "per_position" in data:
            rates = [float(x) for x in data["per_position"]]
            if not rates or any(not 0 <= r <= 1 for r in rates):
                raise ValueError("per_position rates must lie in 0..1")
            pub = Published(path.name, "user", len(rates), str(path),
                            per_position=tuple(rates),
                            conditional=bool(data.get("conditional", False)))
        else:
            pub = Published(path.name, "user", int(data["k"]), str(path),
                            mean_length=float(data["mean_acceptance_length"]),
                            bonus_counted=bool(data.get("bonus_counted", True)))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: {exc}",
                         'give "per_position" (unconditional unless "conditional": true), or '
                         '"mean_acceptance_length" with "bonus_counted" and "k"') from exc
    ref = pub.reference()
    return replace(ref, source="user", tolerance=0.10)


def choose(oracle: Reference | None = None, user: Reference | None = None,
           published: Reference | None = None, self_ref: Reference | None = None
           ) -> Reference | None:
    """The preferred reference available: oracle, then user, then published, then self."""
    for ref in (oracle, user, published, self_ref):
        if ref is not None:
            return ref
    return None
