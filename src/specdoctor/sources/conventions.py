"""Whether a log's own figures follow the counting convention its reader applies to them.

Each engine's reader reads its lines in that engine's convention (``sources.vllm_log``,
``sources.llamacpp``, ``sources.sglang``): vLLM's and llama-server's mean acceptance length
counts the bonus token and their per-position rates are unconditional (accepted at i / drafts),
so a line that prints both must satisfy mean = 1 + the sum of its rates (to the rounding of the
printed figures); SGLang's ``accept len`` counts the bonus token, so it is never below 1. A
line whose figures break the rule was written in another convention (a fork printing
conditional rates, a mean without the bonus token): the figures read from it would be misread.

``check_text`` checks every line that prints the figures the rule needs, per engine. This is
how the diagnosis decides ``metric-convention`` from a log (experiments/logs_scan.py): decided
by the lines, not assumed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from specdoctor.sources.base import printable


@dataclass(frozen=True)
class ConventionCheck:
    """The lines of one engine that print figures a convention can be checked on."""

    engine: str
    checked: int = 0
    held: int = 0
    first_off: str | None = None   # "label:line: what broke", the first line that broke it

    @property
    def holds(self) -> bool:
        return self.checked > 0 and self.held == self.checked

    def words(self) -> str:
        rule = RULES[self.engine]
        if self.holds:
            return f"{self.held} of {self.checked} {self.engine} line(s) print {rule}, as read"
        return (f"{self.checked - self.held} of {self.checked} {self.engine} line(s) do not "
                f"print {rule}: first {self.first_off}")


RULES = {
    "vllm": "a mean acceptance length equal to 1 + the sum of their per-position rates "
            "(bonus token counted, rates unconditional)",
    "llamacpp": "a mean acceptance length equal to 1 + the sum of their per-position rates "
                "(bonus token counted, rates unconditional)",
    "sglang": "an accept len of at least 1 (bonus token counted)",
}


def _mean_and_rates_agree(mean: float, rates: list[float]) -> bool:
    """mean (2 decimals) = 1 + sum(rates) (3 decimals each), to the printed rounding."""
    return abs(mean - 1.0 - sum(rates)) <= 0.005 + 0.0005 * len(rates) + 1e-9


def _vllm(line: str) -> tuple[bool, str] | None:
    from specdoctor.sources.vllm_log import V1_MARKER, UnreadableLine, parse_v1_fields

    i = line.find(V1_MARKER)
    if i < 0:
        return None
    try:
        fields = parse_v1_fields(line[i + len(V1_MARKER):])
    except UnreadableLine:
        return None
    mean, rates = (fields or {}).get("mean_acceptance_length"), (fields or {}).get("per_position")
    if not isinstance(rates, list) or mean is None or "nan" in (str(mean), *rates):
        return None
    values = [float(r) for r in rates]
    return (_mean_and_rates_agree(float(str(mean)), values),
            f"mean acceptance length {mean}, 1 + the sum of the rates {1 + sum(values):.3f}")


def _llamacpp(line: str) -> tuple[bool, str] | None:
    from specdoctor.sources.llamacpp import _MEAN, _PER_POS

    m, pos = _MEAN.search(line), _PER_POS.search(line)
    if m is None or pos is None:
        return None
    try:
        mean = float(m.group("mean"))
        rates = [float(x) for x in pos.group("pos").split(",") if x.strip()]
    except ValueError:
        return None
    if not rates:
        return None
    return (_mean_and_rates_agree(mean, rates),
            f"mean acceptance length {mean:.2f}, 1 + the sum of the rates {1 + sum(rates):.3f}")


def _sglang(line: str) -> tuple[bool, str] | None:
    from specdoctor.sources.sglang import MARKER, parse_fields

    i = line.find(MARKER)
    if i < 0:
        return None
    value = parse_fields(line[i + len(MARKER):]).get("accept len")
    try:
        accept_len = float(value) if value is not None else None
    except ValueError:
        return None
    if accept_len is None:
        return None
    return accept_len >= 1.0, f"accept len {value}"


_CHECKS = {"vllm": _vllm, "llamacpp": _llamacpp, "sglang": _sglang}


def check_text(lines: Iterable[str], label: str) -> list[ConventionCheck]:
    """Each engine's check over the lines that print what it needs (none: an empty list)."""
    from specdoctor.sources.registry import engine_of_line

    found: dict[str, list] = {}
    for n, line in enumerate(lines, 1):
        engine = engine_of_line(line)
        check = _CHECKS.get(engine or "")
        result = check(line) if check is not None else None
        if result is None:
            continue
        c = found.setdefault(engine, [0, 0, None])
        c[0] += 1
        if result[0]:
            c[1] += 1
        elif c[2] is None:
            c[2] = f"{label}:{n}: {printable(result[1])}"
    return [ConventionCheck(e, *v) for e, v in found.items()]
