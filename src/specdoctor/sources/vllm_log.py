"""vLLM log lines → acceptance windows.

Formats read (vllm/v1/spec_decode/metrics.py and its history):

- V1 (current): ``SpecDecoding metrics: Mean acceptance length: 2.00, Accepted throughput: 1.00
  tokens/s, Drafted throughput: 2.72 tokens/s, Accepted: 21 tokens, Drafted: 57 tokens,
  Per-position acceptance rate: 0.667, 0.238, 0.095, Avg Draft acceptance rate: 36.8%``.
  Each line covers the interval since the previous one (``SpecDecodingLogging.log`` resets).
  Forks that add fields are read too: fields are found by name, not by position.
- early V1: ``SpecDecoding metrics: Draft acceptance rate: 36.8%, Accepted: N tokens, Drafted:
  N tokens`` (per-interval; no draft count, no per-position rates), and before vLLM #15902
  ``Speculative metrics: Draft acceptance rate: 1.000, Number of accepted tokens: N, Number of
  draft tokens: N, `` (per-interval too: no k, no system efficiency, no emitted tokens).
- V0 (<= 0.9): ``Speculative metrics: Draft acceptance rate: 0.642, System efficiency: 0.510,
  Number of speculative tokens: 3, Number of accepted tokens: N, Number of draft tokens: N,
  Number of emitted tokens: N.`` (older: ``Number of draft tokens tokens:``, ``Number of
  emitted tokens tokens:``). Running totals since the server started
  (vllm/spec_decode/metrics.py, ``AsyncMetricsCollector`` keeps ``self._aggregate_*``): a
  log's figures are its last line; a window is the difference of two consecutive lines.

Counting rules:

- V1 lines carry no draft count: ``sources.recovery`` recovers it from the printed mean
  acceptance length and per-position rates, or bounds it (``drafts_range``) when several counts
  print the same figures; draft_tokens / k for fixed-length drafters (draft_model, EAGLE, MTP,
  DFlash), where k is the length of the per-position list.
- V0's "accepted" counts every draft token the verifier accepted, also past the first
  rejection (``accepted.sum()`` in vllm/model_executor/layers/spec_decode_base_sampler.py);
  only the emitted count follows the prefix rule: a step emits its accepted prefix plus one
  token. So drafts = draft tokens / k, accepted tokens (prefix) = emitted - drafts, and the mean
  acceptance length = emitted / drafts; V0's own figure is kept in ``Window.printed``.
- A window whose drafts are zero (vLLM then prints ``nan``) is kept, with zero counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.methods import LOOKUP_METHODS
from specdoctor.sources.recovery import recover_counts, recovery_notes
from specdoctor.sources.base import (
    LogReading, ReadOptions, SkippedLines, Window, WindowSink, huge_number, printable,
)

if TYPE_CHECKING:
    from specdoctor.sources.scan import LogInput

ENGINE = "vllm"
V1_MARKER = "SpecDecoding metrics:"
V0_MARKER = "Speculative metrics:"
MARKERS = (V1_MARKER, V0_MARKER)
# What a pre-filter must let through: the metrics lines (both markers: grep -F skips faster
# with these long needles than with the "metrics:" they share, which many other lines of a
# server log carry), and the start-up line naming the method, looked for in the head of each
# file only.
CONFIG_NEEDLE = "speculative_config"

DrafterKind = Literal["fixed", "variable", "auto"]

_NUM = r"(nan|inf|-?\d+(?:\.\d+)?)"
# One per-position rate, and a list of them: vLLM writes ", " between rates, and logs copied
# through other tools (or forks) may have "," alone; both are read whole.
_RATE = r"(?:nan|\d+\.\d+)"
_RATES = _RATE + r"(?:,\s*" + _RATE + r")*"
# What may follow a per-position list read to its end: the end of the line, or the next field.
_AFTER_LIST = re.compile(r"\s*(?:$|,\s*[A-Za-z])")
_FIELDS = {
    "mean_acceptance_length": re.compile(r"Mean acceptance length: " + _NUM),
    "accepted": re.compile(r"Accepted: (\d+) tokens"),
    "drafted": re.compile(r"Drafted: (\d+) tokens"),
    "per_position": re.compile(r"Per-position acceptance rate: (" + _RATES + ")"),
    "acceptance_rate_pct": re.compile(r"(?:Avg )?Draft acceptance rate: " + _NUM + "%"),
}
_V0_FIELDS = {
    "acceptance_rate": re.compile(r"Draft acceptance rate: " + _NUM),
    "k": re.compile(r"Number of speculative tokens: (\d+)"),
    "accepted": re.compile(r"Number of accepted tokens: (\d+)"),
    "drafted": re.compile(r"Number of draft tokens(?: tokens)?: (\d+)"),
    "emitted": re.compile(r"Number of emitted tokens(?: tokens)?: (\d+)"),
}
# The per-interval "Speculative metrics:" of early V1 (before vLLM #15902) has only these.
_EARLY_V1_FIELDS = ("acceptance_rate", "accepted", "drafted")
# "INFO 11-29 08:50:01 [loggers.py:257]" (optionally "(APIServer pid=1) " before it)
_TIMESTAMP = re.compile(r"(?:DEBUG|INFO|WARNING)\s+(\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)")
_METHOD = re.compile(r"speculative_config=SpeculativeConfig\(method='?([\w-]+)'?")
_METHOD_ARG = re.compile(r"""["']method["']\s*:\s*["']([\w-]+)["']""")


_V1_CURRENT = re.compile(
    r" Mean acceptance length: (nan|inf|\d+\.\d+), Accepted throughput: [^,]*, "
    r"Drafted throughput: [^,]*, Accepted: (\d+) tokens, Drafted: (\d+) tokens, "
    r"Per-position acceptance rate: (" + _RATES + "), "
    r"Avg Draft acceptance rate: (nan|\d+(?:\.\d+)?)%\s*$"
)


def _split_rates(rates: str) -> list[str]:
    """The rates of a list matched by ``_RATES`` (only rates, commas and white space)."""
    return "".join(rates.split()).split(",")


def parse_v1_current(text: str) -> dict[str, object] | None:
    """The fields of a payload in the current V1 format (as ``parse_v1_fields``), else None."""
    m = _V1_CURRENT.match(text)
    return None if m is None else _current_fields(m)


def _current_fields(m: re.Match[str]) -> dict[str, object]:
    mean, accepted, drafted, rates, pct = m.groups()
    return {"mean_acceptance_length": mean, "accepted": accepted, "drafted": drafted,
            "per_position": _split_rates(rates), "acceptance_rate_pct": pct}


class UnreadableLine(ValueError):
    """A metrics line that cannot be read as a whole; the message says what is wrong."""


def parse_v1_fields(text: str) -> dict[str, object] | None:
    """The fields of one ``SpecDecoding metrics:`` payload, as printed; None if it has no
    Accepted/Drafted counts. Raises ``UnreadableLine`` for a per-position list that does not
    end where a list ends (a rate written another way, a line cut inside the list): reading
    its first rates only would give a wrong k and wrong counts."""
    current = parse_v1_current(text)
    if current is not None:
        return current
    out: dict[str, object] = {}
    for name, rx in _FIELDS.items():
        m = rx.search(text)
        if m:
            out[name] = m.group(1)
            if name == "per_position" and not _AFTER_LIST.match(text, m.end()):
                raise UnreadableLine("per-position list not read to its end: "
                                     f"{printable(text[m.start(1):m.end() + 12], 60)!r}")
    if "accepted" not in out or "drafted" not in out:
        return None
    if "per_position" in out:
        out["per_position"] = _split_rates(str(out["per_position"]))
    return out


def parse_v0_fields(text: str) -> dict[str, str] | None:
    """The fields of a ``Speculative metrics:`` payload: all of V0's, or (early V1) the three
    of ``_EARLY_V1_FIELDS``; None when neither set is complete."""
    out: dict[str, str] = {}
    for name, rx in _V0_FIELDS.items():
        m = rx.search(text)
        if m is not None:
            out[name] = m.group(1)
    if len(out) == len(_V0_FIELDS) or (set(out) == set(_EARLY_V1_FIELDS)
                                       and "System efficiency" not in text):
        return out
    return None


def drafter_method(line: str) -> str | None:
    """The speculative method named in a vLLM start-up line, if the line names one."""
    m = _METHOD.search(line)
    if m is None and "speculative_config" in line:
        m = _METHOD_ARG.search(line)
    return m.group(1) if m else None


V0_NOTE = (
    "vLLM V0 counts as accepted every draft token the verifier would accept, also after the "
    "first rejection (vllm/model_executor/layers/spec_decode_base_sampler.py, accepted.sum()); "
    "the accepted tokens here are the accepted prefixes, emitted tokens minus drafts (each step "
    "emits its accepted prefix and one more token), and drafts are draft tokens / k. Servers "
    "before vLLM #5765 (bonus token off) emitted k, not k + 1, on a step that accepted all k: "
    "there accepted tokens are a lower bound; the tokens per step (emitted / drafts) are exact"
)


@dataclass(frozen=True)
class V0Totals:
    """One V0 ``Speculative metrics`` line: running totals since the server started."""

    k: int
    accepted_any: int   # V0's "accepted": every position the verifier accepted, prefix or not
    draft_tokens: int
    emitted: int        # tokens the verification steps emitted (accepted prefix + one each)

    def follows(self, prev: V0Totals) -> bool:
        """Whether these totals can come after ``prev`` on the same server (none went down)."""
        return (self.accepted_any >= prev.accepted_any and self.draft_tokens >= prev.draft_tokens
                and self.emitted >= prev.emitted)


def v0_window(now: V0Totals, prev: V0Totals | None) -> AcceptanceProfile | str:
    """The counts of the steps between two V0 lines (``prev`` None: since the start), or why
    the pair cannot be read (a pure function)."""
    base = prev or V0Totals(now.k, 0, 0, 0)
    any_acc = now.accepted_any - base.accepted_any
    drafted = now.draft_tokens - base.draft_tokens
    emitted = now.emitted - base.emitted
    if now.k <= 0 or drafted % now.k:
        return f"{drafted} draft tokens are not a whole number of drafts of k={now.k}"
    drafts = drafted // now.k
    prefix = emitted - drafts
    if not 0 <= prefix <= min(any_acc, drafted):
        return (f"{emitted} emitted tokens over {drafts} drafts of k={now.k} with {any_acc} "
                "accepted: not counts of one server (each step emits 1 to k + 1 tokens, and "
                "its accepted prefix is at most what the verifier accepted)")
    return AcceptanceProfile(drafts=drafts, draft_tokens=drafted, accepted_tokens=prefix, k=now.k)


class VllmLogParser:
    """Streaming reader of vLLM log lines: ``feed`` lines in order, each call returns the
    windows it completed; ``finish()`` returns the rest. Memory stays constant.

    ``drafter`` decides how to count windows where nothing was accepted: ``auto`` reads the
    method from the log's start-up lines (ngram and suffix drafts vary in length); without
    one, the first window whose draft count is recoverable decides (fixed-length iff its draft
    tokens are exactly k per draft), and a later window that contradicts it switches to
    variable-length from there on, with a note. Windows that accepted nothing wait (in order)
    until the question is settled.
    """

    def __init__(self, drafter: DrafterKind = "auto") -> None:
        self.drafter = drafter
        self.method: str | None = None
        self.methods: list[tuple[int, str]] = []  # (line, method) where the method is named
        self._configs: list[tuple[int, str]] = []  # start-up lines read ahead, not yet reached
        self.fixed: bool | None = None if drafter == "auto" else drafter == "fixed"
        self.skipped = SkippedLines()
        self.notes: list[str] = []
        self.cumulative = False
        self._waiting: list[tuple[str, int, str | None, dict[str, object]]] = []
        self._v0_prev: V0Totals | None = None
        self._v0_noted = False

    def preload_config(self, lineno: int, line: str) -> None:
        """A start-up line read ahead (a file's head): it takes effect from its own line on, so
        a server restarted into the same file with another method counts from there."""
        method = drafter_method(line)
        if method is not None:
            self._configs.append((lineno, method))
            if len(self._configs) == 1:
                self._set_method(method, "", lineno)

    def _set_method(self, method: str, source: str, lineno: int) -> None:
        if method == self.method:
            return
        if self.method is None:
            self.notes.append(f"speculative method from the start-up log: {method}")
        else:
            self.notes.append(f"{source}:{lineno}: the start-up lines name another method, "
                              f"{method} (was {self.method}): counted as such from there")
        self.method = method
        self.methods.append((lineno, method))
        if self.drafter == "auto":
            self.fixed = method not in LOOKUP_METHODS

    def feed(self, source: str, lineno: int, line: str) -> list[Window]:
        while self._configs and self._configs[0][0] <= lineno:
            at, method = self._configs.pop(0)
            self._set_method(method, source, at)
        if CONFIG_NEEDLE in line:
            method = drafter_method(line)
            if method is not None:
                self._set_method(method, source, lineno)
        if (V1_MARKER in line or V0_MARKER in line) and (why := huge_number(line)) is not None:
            self.skipped.add(source, lineno, why)
            return []
        i = line.find(V1_MARKER)
        if i >= 0:
            # the current format in one match (most lines), else field by field
            m = _V1_CURRENT.match(line, i + len(V1_MARKER))
            try:
                fields = (_current_fields(m) if m is not None
                          else parse_v1_fields(line[i + len(V1_MARKER):]))
            except UnreadableLine as exc:
                self.skipped.add(source, lineno, str(exc))
                return []
            if fields is None:
                self.skipped.add(source, lineno, "SpecDecoding line without Accepted/Drafted counts")
                return []
            return self._v1(source, lineno, _timestamp(line), fields)
        i = line.find(V0_MARKER)
        if i >= 0:
            w = self._feed_v0(source, lineno, line, line[i + len(V0_MARKER):])
            return [w] if w else []
        return []

    def _v1(self, source: str, lineno: int, ts: str | None, fields: dict[str, object]) -> list[Window]:
        accepted, drafted = int(str(fields["accepted"])), int(str(fields["drafted"]))
        if accepted > drafted:
            self.skipped.add(source, lineno, f"{accepted} accepted of only {drafted} drafted")
            return []
        if self.drafter == "auto" and self.method is None:
            self._learn_fixedness(fields)
            if self.fixed is None and accepted == 0:
                self._waiting.append((source, lineno, ts, fields))
                return []
        window = _v1_window(source, lineno, ts, fields, self.fixed, accepted, drafted)
        if self._waiting:
            out = self._flush()
            out.append(window)
            return out
        return [window]

    def _learn_fixedness(self, fields: dict[str, object]) -> None:
        is_fixed = fixedness_evidence(fields)
        if is_fixed is None:
            return
        if self.fixed is None:
            self.fixed = is_fixed
            self.notes.append("no start-up line names the method: drafts judged "
                              + ("fixed-length" if is_fixed else "variable-length")
                              + " from the first window whose draft count is exact")
        elif self.fixed and not is_fixed:
            self.fixed = False
            self.notes.append("a window's draft tokens were not k per draft: counting drafts as "
                              "variable-length from there on (pass --drafter to decide)")

    def _flush(self) -> list[Window]:
        out = [_v1_window(*item, self.fixed, int(str(item[3]["accepted"])),
                          int(str(item[3]["drafted"]))) for item in self._waiting]
        self._waiting.clear()
        return out

    def _feed_v0(self, source: str, lineno: int, line: str, text: str) -> Window | None:
        fields = parse_v0_fields(text)
        if fields is None:
            self.skipped.add(source, lineno, "Speculative metrics line with missing fields "
                                             "(Number of speculative / accepted / draft tokens)")
            return None
        if "k" not in fields:  # early V1: counts of the interval, no k
            acc, drafted = int(fields["accepted"]), int(fields["drafted"])
            if acc > drafted:
                self.skipped.add(source, lineno, f"{acc} accepted of only {drafted} drafted")
                return None
            profile = build_v1_profile(acc, drafted, None, None, self.fixed)
            return Window(ENGINE, source, lineno, profile, _timestamp(line), printed=dict(fields))
        self.cumulative = True
        now = V0Totals(int(fields["k"]), int(fields["accepted"]), int(fields["drafted"]),
                       int(fields["emitted"]))
        prev = self._v0_prev
        if prev is not None and now.k != prev.k:
            self.notes.append(f"{source}:{lineno}: k changed from {prev.k} to {now.k}: the server "
                              "restarted with another k; the window starts from zero again")
            prev = None
        elif prev is not None and not now.follows(prev):
            self.notes.append(
                f"{source}:{lineno}: V0 running totals went down: the server restarted; "
                "the window starts from zero again"
            )
            prev = None
        profile = v0_window(now, prev)
        if isinstance(profile, str):
            self.skipped.add(source, lineno, profile)
            return None
        self._v0_prev = now
        if not self._v0_noted:
            self.notes.append(V0_NOTE)
            self._v0_noted = True
        return Window(ENGINE, source, lineno, profile, _timestamp(line), printed=dict(fields))

    def finish(self) -> list[Window]:
        return self._flush()


def parse_log(lines: Iterable[str], source: str, drafter: DrafterKind = "auto") -> LogReading:
    """All windows of one log's lines (the same shape every engine module returns)."""
    parser = VllmLogParser(drafter)
    reading = LogReading(engine=ENGINE)
    for n, line in enumerate(lines, 1):
        reading.windows.extend(parser.feed(source, n, line))
    reading.windows.extend(parser.finish())
    reading.skipped, reading.notes, reading.cumulative = parser.skipped, parser.notes, parser.cumulative
    return reading


def _v1_window(source: str, lineno: int, ts: str | None, fields: dict[str, object],
               fixed: bool | None, accepted: int, drafted: int) -> Window:
    rates = fields.get("per_position")
    mean = fields.get("mean_acceptance_length")
    profile = build_v1_profile(accepted, drafted, None if mean is None else str(mean),
                               rates if isinstance(rates, list) else None, fixed)
    return Window(ENGINE, source, lineno, profile, ts, printed=fields)


def build_v1_profile(
    accepted: int, drafted: int, mean_printed: str | None,
    rates_printed: list[str] | tuple[str, ...] | None, fixed: bool | None,
) -> AcceptanceProfile:
    """The counts of one V1 window from its printed figures (a pure function)."""
    rec = recover_counts(accepted, drafted, mean_printed, rates_printed, fixed)
    return AcceptanceProfile(
        drafts=rec.drafts,
        draft_tokens=drafted,
        accepted_tokens=accepted,
        accepted_per_position=rec.per_position,
        k=len(rates_printed) if rates_printed else None,
        notes=recovery_notes(rec),
        drafts_range=rec.drafts_range,
    )



def fixedness_evidence(fields: dict[str, object]) -> bool | None:
    """Whether a V1 window shows fixed-length drafts (draft tokens exactly k per draft), or
    None when it cannot tell (nothing accepted, no rates, or no exact draft count)."""
    rates = fields.get("per_position")
    accepted, drafted = int(str(fields["accepted"])), int(str(fields["drafted"]))
    if not isinstance(rates, list) or not rates or accepted == 0:
        return None
    rec = recover_counts(accepted, drafted, _str(fields.get("mean_acceptance_length")), rates, None)
    if rec.drafts is None or rec.drafts == 0:
        return None
    return drafted == rec.drafts * len(rates)


def _str(x: object) -> str | None:
    return None if x is None else str(x)


def _timestamp(line: str) -> str | None:
    m = _TIMESTAMP.search(line, 0, 120)
    return m.group(1) if m else None


def looks_like(line: str) -> bool:
    return V1_MARKER in line or V0_MARKER in line


# Windows handed to the sink a few at a time: consumed while their objects are still in the
# CPU's cache (a block of grep output holds thousands; ~15% less time a window than a block).
_SINK_BATCH = 64


class _VllmSource:
    """vLLM logs: only the lines carrying a metrics marker reach Python (grep on a file; the
    same scan in Python on a stream), in blocks, and each goes through ``VllmLogParser.feed``.
    The method comes from the start-up lines at the head of a file, each from its own line on
    (a stream is scanned for them throughout, in its one pass)."""

    name = ENGINE
    metrics_prefixes = ("vllm:spec_decode",)
    markers = MARKERS
    splits_on_k = True  # V1: the per-position list has num_speculative_tokens entries; V0: k
    # the engine's throughput line (V0 and V1), and the start-up line of a server without it
    serving_markers = ("Avg generation throughput:", "speculative_config=None")

    @staticmethod
    def looks_like(line: str) -> bool:
        return looks_like(line)

    @staticmethod
    def read(inp: LogInput, options: ReadOptions, sink: WindowSink) -> LogReading:
        parser = VllmLogParser(options.drafter)  # type: ignore[arg-type]
        config = CONFIG_NEEDLE.encode()
        wanted = tuple(m.encode() for m in MARKERS)
        if inp.path is not None:
            for lineno, line in inp.head_lines_with(config):
                parser.preload_config(lineno, line)
        else:
            wanted += (config,)
        label, feed = inp.label, parser.feed
        for text in inp.marked_text(wanted):
            windows: list[Window] = []
            for grep_line in text.split("\n")[:-1]:
                num, _, line = grep_line.partition(":")
                windows += feed(label, int(num), line.rstrip("\r"))
                if len(windows) >= _SINK_BATCH:
                    sink(windows)
                    windows = []
            sink(windows)
        sink(parser.finish())
        return LogReading(ENGINE, skipped=parser.skipped, notes=parser.notes,
                          cumulative=parser.cumulative, method=parser.method,
                          methods=parser.methods)

    @staticmethod
    def profile_from_prometheus(text: str) -> AcceptanceProfile:
        from specdoctor.sources import prometheus

        return prometheus.parse_text(text).profile


SOURCE = _VllmSource()
