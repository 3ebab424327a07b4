"""What an engine can do to a drafter: the transformations the replay tries on the reference
drafter to reproduce drafts that differ from its own chain (pure; no torch at import).

Each transformation is one member of a family and is stated once, as an edit of how the
reference drafter is run; every drafter type that has the part the family touches runs it
(``HeadDrafter.chain_with`` for EAGLE3, MTP and DFlash heads, ``ModelDrafter.chain_with`` for a
draft model). A drafter type without that part does not run it, and says so
(``applicable``). The families:

- ``positions``: the rotary positions of the draft decode steps (a DFlash block's queries)
  off by ±1 or ±2, the context where it was;
- ``taps``: the target states a head reads taken one layer later or earlier, with only a
  share of the tapped layer's MLP output (the MLP all-reduce not yet done: one rank's partial
  sum at tensor parallel 2 or 4, as a scalar share of the whole MLP output; a real rank's
  partial sum is its shard of the MLP, not tried yet), or one position stale (the state of
  the token before);
- ``tokens``: the prompt's entries paired one position late (each token with the state of
  the position before; EAGLE3, MTP);
- ``recursion``: the head's later draft steps fed the target's state again instead of its own
  output (EAGLE3, MTP; a DFlash block has no recursion);
- ``norm``: a norm moved before the residual (the state a head's first layer is fed, or its
  block input, normed before it becomes the residual), the output norm of the recursion
  dropped or added, or a norm's weight taken from another layer (a DFlash drafter's context
  keys normed with the first layer's ``k_norm`` in every layer: a grouped norm call whose
  kernel reads one weight row);
- ``weights``: the embedding or the LM head taken from the target instead of the drafter's own
  (only where the drafter ships its own);
- ``attention``: a DFlash block's attention made causal (or not), its window dropped.

Not tried (say so where the mechanism stays open): draft KV kept where it should be
recomputed, which needs the engine's step history rather than a context; what a draft
model's own layers do beyond its positions.

Two at once (``compose``): an engine can do two things to a drafter, one of which changes
nothing visible alone. Where one transformation reproduces a large share of the differing steps
but not enough, it is tried together with each of the others (``decide.pairs_worth``).

A transformation names a mechanism only when it reproduces the engine's drafts on held-out
steps where the plain chain does not (``experiments.replay.decide.transform_check``).
"""

from __future__ import annotations

from dataclasses import dataclass

HEADS = ("eagle3", "mtp", "dflash")
OFFSETS = (1, -1, 2, -2)  # rotary position offsets of the draft decode steps tried
ALL = ("draft_model", *HEADS)
# heads fed the target's auxiliary captures (an MTP layer reads the model's last state)
AUX = ("eagle3", "dflash")
# the knobs that change which target states a head reads (the rest edit the head itself)
TAP_KNOBS = ("tap_shift", "tap_lag", "tap_mlp_share")


@dataclass(frozen=True)
class Transform:
    id: str
    family: str          # positions | taps | tokens | recursion | norm | weights | attention
    hypothesis: str      # the catalogue hypothesis it names: rope-sync or engine-drafting
    mechanism: str       # what the engine does to the drafter, in words
    methods: tuple[str, ...]   # drafter types that have the part it touches
    # the edit, read by the drafters: what it sets (``positions``, ``tap_shift``, ...)
    knob: str
    value: float | int | bool = 0
    parts: tuple[Transform, ...] = ()   # a composition: every part applied (``compose``)

    def applies_to(self, method: str) -> bool:
        return method in self.methods

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "family": self.family, "hypothesis": self.hypothesis,
                "mechanism": self.mechanism}


def position(offset: int) -> Transform:
    return Transform(f"positions{offset:+d}", "positions", "rope-sync",
                     f"the draft decode steps (a DFlash block's queries) run at rotary positions "
                     f"{offset:+d} from the tokens they draft", ALL, "positions", offset)


LIBRARY: tuple[Transform, ...] = (
    *(position(o) for o in OFFSETS),
    Transform("taps-layer+1", "taps", "engine-drafting",
              "the target states the head reads are taken one layer later than its ids say",
              HEADS, "tap_shift", 1),
    Transform("taps-layer-1", "taps", "engine-drafting",
              "the target states the head reads are taken one layer earlier than its ids say",
              HEADS, "tap_shift", -1),
    Transform("taps-mlp-half", "taps", "engine-drafting",
              "each tapped state holds half of its layer's MLP output (the MLP all-reduce "
              "not yet done: one rank's partial sum at tensor parallel 2)",
              AUX, "tap_mlp_share", 0.5),
    Transform("taps-mlp-quarter", "taps", "engine-drafting",
              "each tapped state holds a quarter of its layer's MLP output (one rank's "
              "partial sum at tensor parallel 4)", AUX, "tap_mlp_share", 0.25),
    Transform("taps-stale", "taps", "engine-drafting",
              "the head is fed the target's state of the token before (one position stale)",
              HEADS, "tap_lag", 1),
    Transform("prompt-entries-late", "tokens", "engine-drafting",
              "the prompt's entries pair each token with the target state of the position "
              "before (the first token kept, a zero state first): every prompt entry one "
              "position late", ("eagle3", "mtp"), "prompt_unshifted", True),
    Transform("recursion-from-target", "recursion", "engine-drafting",
              "the head's later draft steps are fed the target's state again instead of the "
              "head's own output", ("eagle3", "mtp"), "recursion_from_target", True),
    Transform("norm-before-residual", "norm", "engine-drafting",
              "the state the head's first layer is fed is normed before it becomes the "
              "residual (EAGLE3: its hidden norm, norm_before_residual the other way round; "
              "MTP and DFlash: the layer's input norm run once more, before the layer, as an "
              "extra norm the checkpoint does not have)", HEADS, "residual_normed", True),
    Transform("recursion-norm-flipped", "norm", "engine-drafting",
              "the head's output fed to its next draft step has its final norm dropped (or "
              "added where the checkpoint drops it)", ("eagle3", "mtp"),
              "recursion_norm_flipped", True),
    Transform("context-norm-first-layer", "norm", "engine-drafting",
              "the context keys of every draft layer are normed with the first layer's k_norm "
              "(a grouped norm call whose kernel reads one weight row)", ("dflash",),
              "context_norm_from", 0),
    Transform("embedding-from-target", "weights", "engine-drafting",
              "the drafter's own embedding is replaced by the target's", HEADS,
              "embed_from_target", True),
    Transform("lm-head-from-target", "weights", "engine-drafting",
              "the drafter's own LM head is replaced by the target's (its first rows, for a "
              "reduced draft vocabulary)", HEADS, "head_from_target", True),
    Transform("attention-causality-flipped", "attention", "engine-drafting",
              "the draft block's attention is causal where the drafter was trained "
              "non-causal (or the reverse)", ("dflash",), "causal_flipped", True),
    Transform("attention-window-dropped", "attention", "engine-drafting",
              "the drafter's sliding window is dropped: full attention over the context",
              ("dflash",), "window_dropped", True),
)

NOT_TRIED = ("draft KV kept where it should be recomputed",)


def applicable(method: str) -> tuple[Transform, ...]:
    return tuple(t for t in LIBRARY if t.applies_to(method))


COMPOSE = "+"


def compose(a: Transform, b: Transform) -> Transform:
    """``a`` and ``b`` applied together (the drafter types both apply to); it names ``a``'s
    hypothesis (the one that reproduced most alone)."""
    return Transform(f"{a.id}{COMPOSE}{b.id}", f"{a.family}{COMPOSE}{b.family}", a.hypothesis,
                     f"{a.mechanism}; and {b.mechanism}",
                     tuple(m for m in a.methods if m in b.methods), "compose", 0, (a, b))


def by_id(tid: str) -> Transform:
    """A transformation of the library, or a composition by its id (``a+b``; a member's own id
    may hold the sign, as ``positions+1`` does, so every split is tried)."""
    for t in LIBRARY:
        if t.id == tid:
            return t
    for i, ch in enumerate(tid):
        if ch != COMPOSE:
            continue
        first = next((t for t in LIBRARY if t.id == tid[:i]), None)
        second = next((t for t in LIBRARY if t.id == tid[i + 1:]), None)
        if first is not None and second is not None:
            return compose(first, second)
    raise KeyError(tid)
