"""The drafter's files against its contract: every key vLLM reads, compared with every reference
there is; the suspects, each with the values a counterfactual should try (pure: no engine, no
model run).

A key's role decides its references (the key comes from vLLM's code, the role from its name and
value):

| role | reference | a suspect when |
|---|---|---|
| selector (compared with literals only: ``model_type``) | none | never: it picks code |
| size (an integer: widths, counts) | the checkpoint's tensors | never here: a wrong size fails to load |
| positions (``max_position_embeddings``…, with no position table in the checkpoint) | the target's value | below it: no tensor pins it, and an engine that caps the drafter's context there stops drafting past it |
| layer ids (``...layer_ids``) | the target's range (read out of vLLM), the count ``fc`` reads, the two copies a config may hold, vLLM's default for this depth, training metadata | out of range, a count the fc cannot take, copies that disagree, none named (vLLM falls back to its default); in range and consistent, only a search can tell: all id sets of the fc's count, through the oracle |
| token id (``..._token_id``) | the tokenizer | an ordinary token, or bos/eos, or no embedding row |
| rope (``rope_parameters``, ``rope_scaling``, ``rope_theta``…) | the target's rope, whatever its spelling | the effective rotations differ |
| mask (``...window``, ``swa``, ``causal``) | the target's value, else vLLM's default | they differ |
| value (floats, strings, flags) | the target's value; vLLM's default; a flag that makes vLLM drop tensors the checkpoint ships | they differ |

A key vLLM never reads is *ignored* (no lead, whatever its value); one it reads only to rewrite
(``set``) is listed with the rewrite. Training metadata in the checkpoint (safetensors
``__metadata__``, training JSON files beside the config) that names a key's value is a reference
of its own. Every key also lands in ``checked`` (compared, and with what) or ``unchecked`` (no
reference could say), so an answer can say what it did not look at.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from specdoctor.experiments.contract import tokens
from specdoctor.experiments.contract.contract import LAYER_IDS, Contract
from specdoctor.experiments.contract.reads import Cfg, Lit
from specdoctor.served_files import ROPE_CONTAINERS, ROPE_TOP_LEVEL, rope_view

ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "(absent)"})()
TOKEN_ID = re.compile(r"(^|_)token(_id)?$")
MASK = re.compile(r"window|swa|causal")
# How far a model reads: a size only where a learned position table has that many rows; with
# rotary (or no) positions nothing in the checkpoint pins it, and it is a value.
POSITIONS = re.compile(r"^(max_position_embeddings|n_positions|max_seq_len|seq_length|"
                       r"max_sequence_length)$")
POSITION_TABLE = re.compile(r"position|wpe|pos_emb")
ROPE_KEYS = (*ROPE_CONTAINERS, *ROPE_TOP_LEVEL)
# Keys that name the code rather than parametrise it: vLLM's registry and the config classes
# select by them, and a drafter is another architecture than its target by design.
IDENTITY = ("architectures", "model_type")
# Search every id set of the fc's count when there are at most this many; else the structured
# candidates only (vLLM's default, the served ids shifted, training metadata).
MAX_SEARCH = 128
# Files beside the config that hold what a training run recorded (never the lab's own records,
# which a served setup does not carry and the diagnosis must not read).
NOT_METADATA = ("config.json", "generation_config.json", "tokenizer.json",
                "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                "vocab.json", "preprocessor_config.json")
PRIVATE_PREFIX = "specdoctor"


@dataclass(frozen=True)
class Candidate:
    value: Any                                  # the value to try (ABSENT: remove the key)
    source: str                                 # where it comes from
    edits: tuple[tuple[str, Any], ...] = ()     # config edits (dotted key, value or ABSENT)


@dataclass(frozen=True)
class Suspect:
    key: str
    value: Any
    candidates: tuple[Candidate, ...]
    hypothesis: str
    why: str
    strength: str = "differs"    # "problem": cannot be right; "differs": against a reference;
    #                              "default": only vLLM's default says otherwise; "search"
    search: bool = False         # the candidates are a search over every fitting value


@dataclass
class Review:
    suspects: list[Suspect] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    unchecked: list[tuple[str, str]] = field(default_factory=list)   # (hypothesis, what)
    ignored: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"suspects": [{"key": s.key, "value": _show(s.value), "hypothesis": s.hypothesis,
                              "why": s.why, "strength": s.strength, "search": s.search,
                              "candidates": [{"value": _show(c.value), "source": c.source}
                                             for c in s.candidates[:8]],
                              "candidates_total": len(s.candidates)} for s in self.suspects],
                "checked": self.checked, "unchecked": [t for _h, t in self.unchecked],
                "ignored": self.ignored}


@dataclass(frozen=True)
class Inputs:
    method: str
    draft: dict[str, Any]             # the drafter's config (MTP: the target's own)
    target: dict[str, Any]
    shapes: dict[str, list[int]] = field(default_factory=dict)   # the drafter's tensors
    tokenizer: tokens.TokenizerFacts | None = None
    metadata: dict[str, Any] = field(default_factory=dict)        # training metadata, flat
    token_counts: dict[int, int] = field(default_factory=dict)    # id -> times in the text


def _show(v: Any) -> Any:
    if v is ABSENT:
        return "(absent)"
    if isinstance(v, dict):
        return {k: _show(x) for k, x in v.items()}
    return v


def get(cfg: dict[str, Any], dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return ABSENT
        node = node[part]
    return node


def put(cfg: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """A copy of ``cfg`` with ``dotted`` set to ``value`` (``ABSENT``: the key removed)."""
    out = json.loads(json.dumps(cfg))
    node = out
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    if value is ABSENT:
        node.pop(last, None)
    else:
        node[last] = value
    return out


def leaves(cfg: dict[str, Any], prefix: str = "", depth: int = 0) -> list[str]:
    """Every key of a config, nested dicts as dotted keys (a dict is a leaf too)."""
    out = []
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        out.append(key)
        if isinstance(v, dict) and depth < 2:
            out += leaves(v, key + ".", depth + 1)
    return out


def role(key: str, value: Any, contract: Contract, shapes: dict[str, list[int]] | None = None
         ) -> str:
    """The key's role (the module's table); ``shapes``: the drafter's tensors, which say
    whether a positions key sizes a table."""
    leaf = key.rsplit(".", 1)[-1]
    if key in IDENTITY or contract.selector(key):
        return "selector"
    if LAYER_IDS.search(key):
        return "layer ids"
    if TOKEN_ID.search(leaf):
        return "token id"
    if key.split(".")[0] in ROPE_KEYS:
        return "rope"
    if MASK.search(leaf):
        return "mask"
    if isinstance(value, int) and not isinstance(value, bool):
        if POSITIONS.match(leaf) and not any(POSITION_TABLE.search(n) for n in shapes or {}):
            return "positions"
        return "size"
    return "value"


def review(contract: Contract, x: Inputs) -> Review:
    """Every key of the drafter's config and every key vLLM reads, against the references."""
    out = Review()
    own = contract.model_file()
    for w in sorted({r.key for r in contract.reads if r.how == "set"}):
        rs = [r for r in contract.writes(w) if r.where.startswith(own)]
        if rs and get(x.draft, w) is not ABSENT:
            out.checked.append(f"{w}: vLLM's model sets it itself ({rs[0].default} at "
                               f"{rs[0].where})")
    for key in leaves(x.draft):
        value = get(x.draft, key)
        if isinstance(value, dict) and any(k.startswith(key + ".") for k in contract.keys()):
            continue    # a container whose keys are compared one by one
        if not contract.is_read(key):
            if "." not in key or contract.is_read(key.rsplit(".", 1)[0]) or \
                    key.rsplit(".", 1)[0] in contract.keys():
                out.ignored.append(f"{key} ({_short(value)})")
            continue
        _by_role(contract, x, key, value, out)
    if x.method == "mtp":
        out.checked.append("the MTP layers are configured by the target's own config: no "
                           "drafter config to compare with it")
    _absent_keys(contract, x, out)
    _rope(contract, x, out)
    _layer_ids(contract, x, out)
    _tensor_flags(contract, x, out)
    out.suspects = _strongest(out.suspects)
    return out


STRENGTHS = ("problem", "differs", "default", "search")


def _strongest(found: list[Suspect]) -> list[Suspect]:
    """One suspect per key: the one with the strongest evidence (a key two rules flag)."""
    best: dict[str, Suspect] = {}
    for s in found:
        old = best.get(s.key)
        if old is None or STRENGTHS.index(s.strength) < STRENGTHS.index(old.strength):
            best[s.key] = s
    return [s for s in found if best[s.key] is s]


def _short(v: Any) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _by_role(contract: Contract, x: Inputs, key: str, value: Any, out: Review) -> None:
    r = role(key, value, contract, x.shapes)
    if x.method == "mtp" and r not in ("token id", "layer ids", "selector", "size"):
        return   # the MTP layers' config is the target's own: nothing to compare it with
    if r == "selector":
        out.checked.append(f"{key}: selects vLLM's code ({_short(value)}), not compared")
    elif r == "size":
        out.checked.append(f"{key} {value}: a size; the checkpoint's tensors pin it (a wrong "
                           "size fails to load)")
    elif r == "positions":
        _positions(x, key, value, out)
    elif r == "token id":
        _token(contract, x, key, value, out)
    elif r in ("rope", "layer ids"):
        return   # compared as a whole below
    elif r == "mask":
        _mask(contract, x, key, value, out)
    else:
        _value(contract, x, key, value, out)


def _positions(x: Inputs, key: str, value: int, out: Review) -> None:
    """How far the drafter reads, against how far the target serves: a drafter's limit below
    the target's is a suspect (an engine may stop drafting for a sequence, or a whole batch,
    once it passes the drafter's limit: vllm#34734); at or above it, checked."""
    t = get(x.target.get("text_config") or x.target, key)
    if not isinstance(t, int) or isinstance(t, bool):
        out.unchecked.append(("draft-config-mismatch", f"{key} {value}: no tensor pins it and "
                              f"the target states no {key} to compare with"))
        return
    if value >= t:
        out.checked.append(f"{key} {value}: no tensor pins it; at least the target's ({t})")
        return
    out.suspects.append(Suspect(key, value, (Candidate(t, "the target's config"),),
                                "draft-config-mismatch",
                                f"the drafter's {key} ({value}) is below the target's ({t}) and "
                                f"no tensor of the checkpoint pins it: past {value} positions "
                                f"the engine may stop drafting"))


def _default_text(contract: Contract, key: str) -> tuple[bool, Any, str]:
    ok, d = contract.default(key)
    return ok, d, f"vLLM's default {json.dumps(d)} ({contract.where(key)})" if ok else ""


def _same_arch(x: Inputs) -> bool:
    d, t = x.draft.get("model_type"), x.target.get("model_type")
    return d is not None and d == t


def _value(contract: Contract, x: Inputs, key: str, value: Any, out: Review) -> None:
    t = get(x.target, key)
    ok, d, dtext = _default_text(contract, key)
    meta = _metadata_value(x, key)
    if meta is not ABSENT and meta != value:
        out.suspects.append(Suspect(key, value, (Candidate(meta, "training metadata"),),
                                    "draft-config-mismatch",
                                    f"the checkpoint's training metadata says {key} = "
                                    f"{_short(meta)}", "differs"))
        return
    if _per_layer(x, value, t):
        if set(map(json.dumps, value)) <= set(map(json.dumps, t)):
            out.checked.append(f"{key}: one entry per layer of each model; the drafter's "
                               f"{len(value)} are of the target's kinds ({_short(value)})")
            return
        out.suspects.append(Suspect(key, value, (Candidate(t[:len(value)], "the target's "
                                                           "config, its first layers"),),
                                    "draft-config-mismatch", f"the drafter's {key} names kinds "
                                    f"of layer the target's has not ({_short(t)})"))
        return
    if t is not ABSENT and not isinstance(t, dict) and x.method != "mtp":
        if _equal(t, value):
            out.checked.append(f"{key}: equals the target's ({_short(value)})")
            return
        out.suspects.append(Suspect(key, value, (Candidate(t, "the target's config"),),
                                    "draft-config-mismatch",
                                    f"the drafter's {key} differs from the target's"))
        return
    if ok:
        if _equal(d, value):
            out.checked.append(f"{key}: equals {dtext}")
            return
        same = _same_arch(x)
        out.suspects.append(Suspect(
            key, value, (Candidate(ABSENT, dtext),), "draft-config-mismatch",
            f"only the drafter sets {key}" + (" (the target, of the same architecture, gets "
                                              f"{dtext})" if same else f"; {dtext}"),
            "differs" if same else "default"))
        return
    out.unchecked.append(("draft-config-mismatch", f"{key} = {_short(value)}: no reference "
                          "(the target has none, vLLM reads it with no literal default)"))


def _per_layer(x: Inputs, value: Any, t: Any) -> bool:
    """Lists of one entry per layer of their own model (``layer_types``): a drafter of fewer
    layers than its target has a shorter one by design, so entries are compared, not lengths."""
    n_d, n_t = x.draft.get("num_hidden_layers"), x.target.get("num_hidden_layers")
    return (isinstance(value, list) and isinstance(t, list) and len(value) == n_d
            and len(t) == n_t and n_d != n_t)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
        except (TypeError, ValueError):
            return False
    return bool(a == b)


def _absent_keys(contract: Contract, x: Inputs, out: Review) -> None:
    """Keys the target sets and the drafter leaves to its default, between configs of the
    same architecture (the target's value is what that architecture was trained with)."""
    if not _same_arch(x) or x.method == "mtp":
        return
    for key in sorted(contract.keys()):
        t = get(x.target, key)
        if "." in key or t is ABSENT or get(x.draft, key) is not ABSENT or isinstance(t, dict):
            continue
        if role(key, t, contract) != "value" or not contract.is_read(key):
            continue
        ok, d, dtext = _default_text(contract, key)
        if ok and _equal(d, t):
            continue
        out.suspects.append(Suspect(
            key, ABSENT, (Candidate(t, "the target's config"),), "draft-config-mismatch",
            f"only the target sets {key}" + (f" (the drafter gets {dtext})" if ok else
                                             " (the drafter gets its class default)")))


def _mask(contract: Contract, x: Inputs, key: str, value: Any, out: Review) -> None:
    t = get(x.target, key)
    ok, d, dtext = _default_text(contract, key)
    ref, src = (t, "the target's") if t is not ABSENT else (d, dtext) if ok else (ABSENT, "")
    if ref is ABSENT and not ok:
        out.unchecked.append(("attention-mask", f"{key} = {_short(value)}: no reference (the "
                              "target has none, vLLM reads it with no literal default)"))
        return
    if _equal(value, ref) or (value in (False, None) and ref in (ABSENT, None, False)):
        out.checked.append(f"{key}: agrees with {src or 'the default'}")
        return
    out.suspects.append(Suspect(key, value, (Candidate(ref if ref is not None else ABSENT, src),),
                                "attention-mask", f"the drafter's {key} differs from {src}"))


def _token(contract: Contract, x: Inputs, key: str, value: Any, out: Review) -> None:
    if x.tokenizer is None:
        out.unchecked.append(("draft-config-mismatch",
                              f"{key} = {value}: no tokenizer to check it against"))
        return
    rows = x.target.get("vocab_size") if x.method != "mtp" else x.draft.get("vocab_size")
    verdict = tokens.check_placeholder(value, x.tokenizer, rows if isinstance(rows, int) else None)
    seen = x.token_counts.get(value) if isinstance(value, int) else None
    meta = _metadata_value(x, key)
    if meta is not ABSENT and meta != value:
        out.suspects.append(Suspect(key, value, (Candidate(meta, "training metadata"),),
                                    "draft-config-mismatch",
                                    f"the checkpoint's training metadata says {key} = {meta}"))
        return
    if verdict.ok:
        out.checked.append(f"{key} {value}: {verdict.why}"
                           + (" (absent from the measured text)" if seen == 0 else ""))
        return
    where = f"; it occurs {seen} times in the measured text" if seen else ""
    cands = tuple(Candidate(tid, what) for tid, what in verdict.candidates if tid != value)
    out.suspects.append(Suspect(key, value, cands, "draft-config-mismatch",
                                f"{key} {verdict.why}{where}; a placeholder must be a token "
                                "ordinary text never produces", "problem"))


def _rope(contract: Contract, x: Inputs, out: Review) -> None:
    """The rotary embedding as a whole, whichever spelling each config uses (``rope_view``);
    a theta only one side sets is left alone (the other side's is its architecture's default)."""
    if x.method == "mtp" or not any(contract.is_read(k) for k in ROPE_KEYS):
        return
    dv, tv = rope_view(x.draft), rope_view(x.target)
    keys = [k for k in sorted(dv.keys() | tv.keys()) if dv.get(k, ABSENT) != tv.get(k, ABSENT)
            and not (k == "rope_theta" and (k not in dv or k not in tv))]
    if not keys:
        out.checked.append("rope: the drafter rotates as the target does")
        return
    edits = [(c, ABSENT) for c in ROPE_KEYS if c in x.draft]
    edits += [(c, x.target[c]) for c in ROPE_KEYS if c in x.target]
    where = next((c for c in reversed(ROPE_CONTAINERS) if isinstance(x.draft.get(c), dict)),
                 next((c for c in reversed(ROPE_CONTAINERS) if isinstance(x.target.get(c), dict)),
                      "rope"))
    if len(keys) == 1:
        k = keys[0]
        name = k if k in x.draft and k in ROPE_TOP_LEVEL else f"{where}.{k}"
        value, ref = dv.get(k, ABSENT), tv.get(k, ABSENT)
    else:
        name = where
        value = {k: dv.get(k, ABSENT) for k in keys}
        ref = {k: tv.get(k, ABSENT) for k in keys}
    out.suspects.append(Suspect(name, value, (Candidate(ref, "the target's rope", tuple(edits)),),
                                "draft-config-mismatch",
                                f"the drafter's rotary embedding differs from the target's "
                                f"({', '.join(keys)})"))


# -- layer ids ------------------------------------------------------------------------------------

def fc_states(x: Inputs) -> int | None:
    """How many target states the drafter's fc reads (its input width over the target's)."""
    fc = x.shapes.get("fc.weight") or x.shapes.get("model.fc.weight")
    hidden = (x.target.get("text_config") or x.target).get("hidden_size")
    if fc and len(fc) == 2 and isinstance(hidden, int) and hidden and fc[1] % hidden == 0:
        return fc[1] // hidden
    return None


def effective_ids(method: str, draft: dict[str, Any], layers: int) -> tuple[int, ...] | None:
    """The aux ids vLLM taps for this config, in its precedence and normalisation (the oracle's
    statement of it, pinned against vLLM's own function by tests/oracle/heads)."""
    from specdoctor.oracle.heads.conventions import aux_ids, aux_ids_from_config

    if method not in ("eagle3", "dflash"):
        return None
    if aux_ids_from_config(draft) is None and method == "dflash":
        return None
    return aux_ids(draft, layers)


def _layer_ids(contract: Contract, x: Inputs, out: Review) -> None:
    aux = contract.aux
    if aux is None or x.method not in ("eagle3", "dflash"):
        return
    layers = int((x.target.get("text_config") or x.target).get("num_hidden_layers") or 0)
    present = {k: get(x.draft, k) for k in aux.offsets if get(x.draft, k) is not ABSENT}
    n_fc = fc_states(x)
    eff = effective_ids(x.method, x.draft, layers)
    named = f"{x.method} ids as vLLM taps them: {list(eff) if eff else None}"
    # the key a candidate is written to: every copy the config has, else the method's own key
    own = "dflash_config.target_layer_ids" if x.method == "dflash" else \
        "eagle_aux_hidden_state_layer_ids"
    targets = sorted(present, key=lambda k: k.count(".")) or [own]

    def edits(ids: tuple[int, ...]) -> tuple[tuple[str, Any], ...]:
        return tuple((k, [i - aux.offsets.get(k, 0) for i in ids]) for k in targets)

    def cand(ids: tuple[int, ...], source: str) -> Candidate:
        return Candidate([i - aux.offsets.get(targets[0], 0) for i in ids], source, edits(ids))

    structured: list[Candidate] = []
    for k in present:
        meta = _metadata_value(x, k)
        if isinstance(meta, list) and all(isinstance(i, int) for i in meta):
            structured.append(cand(tuple(sorted({i + aux.offsets.get(k, 0) for i in meta})),
                                   f"training metadata ({k})"))
    if aux.default is not None:
        structured.append(cand(tuple(sorted(set(aux.default))),
                               f"vLLM's default for a {layers}-layer target "
                               f"({aux.where[1] if len(aux.where) > 1 else 'interfaces.py'})"))
    problems: list[str] = []
    values = {k: v for k, v in present.items()}
    if len({json.dumps(v) for v in values.values()}) > 1:
        problems.append("its copies disagree (" + ", ".join(f"{k} {v}" for k, v in values.items())
                        + "): vLLM taps the first it finds and sizes fc from another")
    for k, v in present.items():
        if not isinstance(v, list) or not all(isinstance(i, int) for i in v):
            problems.append(f"{k} {v!r} is not a list of layer ids")
            continue
        off = aux.offsets.get(k, 0)
        lo, hi = aux.lo - off, aux.hi - off
        lo = max(lo, 0) if off else lo   # a convention that counts layer outputs starts at 0
        bad = [i for i in v if not lo <= i <= hi]
        if bad:
            problems.append(f"{k} {v}: {bad} outside {lo}..{hi}, the range of this "
                            f"{layers}-layer target in this key's counting (vLLM adds {off})")
            shifted = [i + (lo - min(v) if min(v) < lo else hi - max(v)) for i in v]
            structured.insert(0, cand(tuple(sorted({i + off for i in shifted})),
                                      "the ids shifted back into the range (the other "
                                      "counting convention)"))
    if not present and eff is not None:
        bad = [i for i in eff if not aux.lo <= i <= aux.hi]
        if bad:
            problems.append(f"the drafter names no aux layers and vLLM's default for this "
                            f"{layers}-layer target, {list(eff)}, has {bad} outside "
                            f"{aux.lo}..{aux.hi}")
    if eff is not None and n_fc is not None and len(set(eff)) != n_fc:
        problems.append(f"vLLM taps {len(set(eff))} distinct states ({list(eff)}; "
                        f"{aux.normalise or 'each once'}) where fc reads {n_fc}")
    size = n_fc or (len(set(eff)) if eff else None)
    if size is None:
        out.unchecked.append(("draft-config-mismatch",
                              f"layer ids ({named}): the fc's width is unknown, no search"))
        return
    pool = range(aux.lo, aux.hi + 1)
    n_sets = math.comb(len(pool), size)
    searched = [cand(ids, "search") for ids in combinations(pool, size)] \
        if n_sets <= MAX_SEARCH else []
    if eff is not None and not searched:
        for step in (-2, -1, 1, 2):
            ids = tuple(sorted({i + step for i in eff}))
            if len(ids) == size and all(aux.lo <= i <= aux.hi for i in ids):
                structured.append(cand(ids, f"the served ids shifted by {step:+d}"))
    served = tuple(sorted(set(eff))) if eff else None
    seen: set[str] = set()
    cands = []
    for c in (*structured, *searched):
        ids = json.dumps(c.edits)
        tapped = tuple(sorted({i + aux.offsets.get(targets[0], 0) for i in c.value}))
        if ids in seen or tapped == served or len(tapped) != size or not all(
                aux.lo <= i <= aux.hi for i in tapped):
            continue   # the served set, or one the fc or the target cannot take
        seen.add(ids)
        cands.append(c)
    scope_note = (f"every set of {size} ids in {aux.lo}..{aux.hi} ({n_sets})" if searched else
                  f"{len(cands)} structured candidates (all {n_sets} sets of {size} exceed "
                  f"{MAX_SEARCH})")
    key = targets[0]
    if not cands:
        if problems:
            out.unchecked.append(("draft-config-mismatch", f"layer ids ({named}): "
                                  + "; ".join(problems) + "; no other set fits to try"))
        else:
            out.checked.append(f"layer ids ({named}): the only set of {size} ids in "
                               f"{aux.lo}..{aux.hi}")
        return
    if problems:
        out.suspects.append(Suspect(key, present.get(key, ABSENT), tuple(cands),
                                    "draft-config-mismatch", "; ".join(problems), "problem",
                                    search=bool(searched)))
    elif not present:
        out.suspects.append(Suspect(
            key, ABSENT, tuple(cands), "draft-config-mismatch",
            f"the drafter names no aux layers: vLLM taps the target model's default "
            f"{list(aux.default) if aux.default else '?'} for this {layers}-layer target, and "
            "nothing in the files says the drafter was trained on them", "differs",
            search=bool(searched)))
    else:
        out.checked.append(f"layer ids ({named}): inside {aux.lo}..{aux.hi}, {size} distinct as "
                           f"fc reads, copies agree; no file says which layers the drafter "
                           f"was trained on")
        out.suspects.append(Suspect(
            key, present[key], tuple(cands), "draft-config-mismatch",
            f"{key} {present[key]} fits every check a file allows; whether these are the "
            f"layers it was trained on only a search tells ({scope_note})", "search",
            search=True))


# -- tensors --------------------------------------------------------------------------------------

def resolve(v: Any, cfg: dict[str, Any]) -> Any:
    """The value a config value takes for this config (its default where the key is absent)."""
    if isinstance(v, Cfg):
        got = get(cfg, v.path)
        return got if got is not ABSENT else resolve(v.default, cfg)
    if isinstance(v, Lit):
        return v.value
    return None


def _tensor_flags(contract: Contract, x: Inputs, out: Review) -> None:
    """A flag that makes vLLM drop tensors the checkpoint ships (e.g. ``fc.`` when
    ``use_aux_hidden_state`` is false): the flag contradicts the checkpoint."""
    for rule in contract.tensors:
        shipped = sorted(n for n in x.shapes if rule.pattern in n)
        if rule.flag is None:
            if shipped and not rule.on_checkpoint:
                out.ignored.append(f"tensors {', '.join(shipped[:3])}: vLLM skips every "
                                   f"'{rule.pattern}' ({rule.where})")
            continue
        value = resolve(rule.flag, x.draft)
        if not shipped:
            continue
        if bool(value) == rule.keep_when:
            out.checked.append(f"{rule.flag.path}: keeps the checkpoint's {shipped[0]}")
            continue
        out.suspects.append(Suspect(
            rule.flag.path, get(x.draft, rule.flag.path), (Candidate(rule.keep_when,
                                                                     "the checkpoint's tensors"),),
            "draft-config-mismatch",
            f"{rule.flag.path} = {json.dumps(value)} makes vLLM drop {len(shipped)} tensor(s) the "
            f"checkpoint ships ({', '.join(shipped[:3])}; {rule.where})", "problem"))


# -- what the checkpoint says about its training -------------------------------------------------

def training_metadata(model_dir: Path) -> dict[str, Any]:
    """Flat (dotted) keys of what training recorded in the checkpoint: safetensors
    ``__metadata__`` and JSON files beside the config (not the config, the tokenizer, or a
    file of this project's own lab)."""
    found: dict[str, Any] = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        try:
            with open(f, "rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                if n > 100_000_000:
                    continue
                meta = json.loads(fh.read(n)).get("__metadata__") or {}
        except (OSError, ValueError, struct.error):
            continue
        for k, v in meta.items():
            if k == "format":
                continue
            try:
                v = json.loads(v) if isinstance(v, str) else v
            except ValueError:
                pass
            _flatten(v, k, found)
    for f in sorted(model_dir.glob("*.json")):
        if f.name in NOT_METADATA or f.name.startswith(PRIVATE_PREFIX):
            continue
        try:
            _flatten(json.loads(f.read_text(encoding="utf-8")), "", found)
        except (OSError, ValueError):
            continue
    return found


def _flatten(v: Any, prefix: str, out: dict[str, Any], depth: int = 0) -> None:
    if isinstance(v, dict) and depth < 4:
        for k, x in v.items():
            _flatten(x, f"{prefix}.{k}" if prefix else str(k), out, depth + 1)
    elif prefix:
        out[prefix] = v


def _metadata_value(x: Inputs, key: str) -> Any:
    """The value training metadata records under ``key``'s own name (its last part)."""
    leaf = key.rsplit(".", 1)[-1]
    hits = [v for k, v in x.metadata.items() if k.rsplit(".", 1)[-1] == leaf]
    return hits[0] if len(hits) == 1 or (hits and all(h == hits[0] for h in hits)) else ABSENT
