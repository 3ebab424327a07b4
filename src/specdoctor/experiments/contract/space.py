"""The changes of a drafter's served config that the engine's code tells apart, generated from
the drafter's contract (the keys the installed engine reads, with the defaults it reads them
with), never from a list of field names.

What the space holds, for the keys both the engine and the oracle read:

- every flag both ways. A flag is a key whose value, or the literal default the engine reads it
  with, is a boolean (or that the engine reads through ``bool()``). A present flag is flipped,
  an absent one is set to the value its default is not.
- what a flag switched on brings with it, when the flag alone does not run: each key of the
  flag's own container that the engine reads with no default and the config lacks, set beside
  it over the powers of two up to the context (a switch the code cannot take without its
  parameter: ``with_parameters``).
- every integer of a sub-config that also holds a flag which is on (a window, a span: a length
  the code compares positions with), over the same powers of two. A size the checkpoint's
  tensors pin is never one of these: the model's sizes live at the top level of its config.

Left out: keys that select code rather than parametrise it, layer ids and token ids (searched
apart, with their own references), rope parameters (compared apart), keys of a sub-config the
drafter does not have, and keys the reference review already turned into leads.

Each change is scored through the oracle by the counterfactual (``experiments.counterfactual``):
the best on half of the prompts, held out on the other half.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from specdoctor.experiments.contract.compare import ABSENT, get, role
from specdoctor.experiments.contract.contract import Contract

# Never more changes than this in one space (flags first, then lengths in ascending order).
MAX_MOVES = 48
SMALLEST_LENGTH = 2
SKIPPED_ROLES = ("selector", "layer ids", "token id", "rope")


@dataclass(frozen=True)
class Move:
    """One change of the served config: ``edits`` (dotted key, value or ``ABSENT``)."""

    edits: tuple[tuple[str, Any], ...]
    kind: str            # "flag", "flag with its parameters", "length"

    @property
    def field(self) -> str:
        return " + ".join(k for k, _ in self.edits)

    def text(self, draft: dict[str, Any]) -> str:
        return ", ".join(f"{k} {_show(get(draft, k))} → {_show(v)}" for k, v in self.edits)


def _show(v: Any) -> str:
    return "(absent)" if v is ABSENT else json.dumps(v)


def lengths(context: int) -> list[int]:
    """The powers of two from ``SMALLEST_LENGTH`` up to the first at or past ``context``."""
    out, n = [], SMALLEST_LENGTH
    while True:
        out.append(n)
        if n >= max(context, SMALLEST_LENGTH):
            return out
        n *= 2


def _flag_default(contract: Contract, key: str) -> bool | None:
    """The boolean the engine reads ``key`` with when it is absent; None when it is no flag."""
    ok, d = contract.default(key)
    if ok and isinstance(d, bool):
        return d
    if "bool()" in contract.normalisations(key):
        return bool(d) if ok else False
    return None


def _parent(key: str) -> str:
    return key.rsplit(".", 1)[0] if "." in key else ""


def _container_present(draft: dict[str, Any], key: str) -> bool:
    p = _parent(key)
    return not p or isinstance(get(draft, p), dict)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def moves(contract: Contract, draft: dict[str, Any], context: int,
          tried: frozenset[str] = frozenset(), readable: Any = None) -> list[Move]:
    """The space for ``draft`` served under ``contract``; ``context``: the longest sequence the
    server is asked to hold (the lengths' bound); ``tried``: keys the reference review already
    made leads of; ``readable(key)``: whether the scorer (the oracle) reads the key (None: all)."""
    def eligible(key: str) -> bool:
        if not contract.is_read(key) or not _container_present(draft, key):
            return False
        if readable is not None and readable(key) is False:
            return False
        value = get(draft, key)
        return role(key, None if value is ABSENT else value, contract) not in SKIPPED_ROLES

    keys = sorted(k for k in contract.keys() if eligible(k))
    flags: dict[str, bool] = {}            # key -> its value as served (default when absent)
    for k in keys:
        v = get(draft, k)
        if isinstance(v, bool):
            flags[k] = v
        elif v is ABSENT:
            d = _flag_default(contract, k)
            if d is not None:
                flags[k] = d
    out = [Move(((k, not served),), "flag") for k, served in flags.items() if k not in tried]
    grid = lengths(context)
    # a sub-config whose flag is on as served (a flag a lead already tried included)
    on = {_parent(k) for k, v in flags.items() if v and _parent(k)}
    for x in keys:
        v = get(draft, x)
        if _parent(x) in on and x not in flags and x not in tried and _is_int(v):
            out += [Move(((x, n),), "length") for n in grid if n != v]
    return out[:MAX_MOVES]


def with_parameters(contract: Contract, draft: dict[str, Any], move: Move, context: int
                    ) -> list[Move]:
    """A flag switched on that the scorer could not run alone, with each parameter it may
    need: a key of the flag's own container that the engine reads with no default and the
    config lacks, over the powers of two up to ``context`` (one parameter at a time)."""
    (key, value), = move.edits
    if value is not True:
        return []
    needs = sorted(x for x in contract.keys()
                   if _parent(x) == _parent(key) and x != key and contract.is_read(x)
                   and get(draft, x) is ABSENT and not contract.default(x)[0]
                   and _flag_default(contract, x) is None
                   and role(x, None, contract) not in SKIPPED_ROLES)
    return [Move(((key, True), (x, n)), "flag with its parameter")
            for x in needs for n in lengths(context)]
