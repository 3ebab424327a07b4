"""llama.cpp server (llama-server) acceptance figures → acceptance profiles.

What llama-server counts (read in ggml-org/llama.cpp, tools/server/server-context.cpp,
``server_slot::print_timings`` and ``reset``, and common/speculative.cpp,
``common_speculative_print_stats``):

- Per request. Each slot keeps ``stats.n_draft_tokens`` (draft tokens sent to verification;
  since ggml-org/llama.cpp#14104 drafts dropped by ``--draft-min`` are not counted),
  ``n_draft_accepted`` (accepted draft tokens, bonus NOT counted), ``n_draft_verif_steps``
  (verification steps with a draft) and ``n_accepted_per_pos[i]``. ``reset()`` clears them when the
  slot is released, so every line below covers exactly one request (one task).
- Log line at release, three formats:
  * current: ``draft acceptance = %0.5f (%5d accepted / %5d generated), mean len = %5.2f`` with
    mean len = 1 + accepted / verification steps (bonus counted, vLLM's convention), plus, at
    trace verbosity only, ``acc per pos = (…)`` with accepted at i / verification steps (``%.3f``,
    unconditional, vLLM's convention);
  * during review of ggml-org/llama.cpp#24536: ``…, mean acceptance length = %5.2f, acceptance
    rate per position = (…)`` on the same line;
  * older: ``draft acceptance rate = %0.5f (%5d accepted / %5d generated)``.
- Response ``timings.draft_n`` / ``timings.draft_n_accepted`` (ggml-org/llama.cpp#12603): the same
  per-request pair; no verification-step count (#27676, which would add it, was closed).
- ``statistics <drafter>: … #gen drafts = N, #acc drafts = N, #gen tokens = N, #acc tokens = N``
  (common/speculative.cpp): running totals per drafter since the server started; ``#acc drafts``
  counts drafts with at least one accepted token (accepted at position 0).
- ``/metrics`` with ``--metrics`` (ggml-org/llama.cpp#26389, merged 2026-07-31): counters
  ``llamacpp:spec_decode_num_drafts``, ``…_num_draft_tokens``, ``…_num_accepted_tokens`` and
  ``…_num_accepted_tokens_per_pos{position="N"}`` "matching the vLLM counter schema", cumulative
  since start; exported with a ``_total`` suffix in use. The names and meaning are taken from that
  pull request and scripts that scrape it; the merged code was not in the source snapshot read.

Counting rules:

- Counts are used whenever printed: accepted and draft tokens are exact on every line.
- The verification-step count (drafts) is recovered from the printed mean length and per-position
  rates only when exactly one integer reproduces every printed figure (formatted as llama.cpp
  formats it); per-position counts likewise, each from exactly one integer. Else it stays unknown.
- Never average averages: windows and totals add counts (``sum_profiles``); a total whose drafts
  are unknown in any window has unknown drafts, never a guessed one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dataclasses import replace

from specdoctor.acceptance.profile import AcceptanceProfile, sum_profiles
from specdoctor.errors import InputError
from specdoctor.sources import recovery
from specdoctor.sources.recovery import Recovered, recovery_notes
from specdoctor.sources.base import count_of, huge_number, printable, LineSource, LogReading, ReadOptions, Window

ENGINE = "llamacpp"
MARKER = "draft acceptance"
PER_POS_MARKER = "acc per pos ="
STATS_MARKER = "#gen drafts ="
MARKERS = (MARKER, PER_POS_MARKER, STATS_MARKER)

_LINE = re.compile(
    r"draft acceptance(?: rate)?\s*=\s*(?P<rate>\S+)\s*"
    r"\(\s*(?P<acc>\d+)\s+accepted\s*/\s*(?P<gen>\d+)\s+generated\s*\)"
)
_MEAN = re.compile(r"mean (?:acceptance length|len)\s*=\s*(?P<mean>[^,\s]+)")
_PER_POS = re.compile(
    r"(?:acceptance rate per position|acc per pos|#acc rate/pos)\s*=\s*\((?P<pos>[^)]*)\)"
)
_SLOT = re.compile(r"\bid\s+(\d+)\s*\|\s*task\s+(-?\d+)")
_TIMESTAMP = re.compile(r"^(?:\[\d+\]\s+)?(\d+\.\d\d\.\d{3}\.\d{3})\s+[A-Z]\s")
_STATS_NAME = re.compile(r"statistics\s+(\S+?):")
_STATS_FIELDS = {
    "drafts": re.compile(r"#gen drafts\s*=\s*(\d+)"),
    "drafts_accepted": re.compile(r"#acc drafts\s*=\s*(\d+)"),
    "draft_tokens": re.compile(r"#gen tokens\s*=\s*(\d+)"),
    "accepted": re.compile(r"#acc tokens\s*=\s*(\d+)"),
}


# -- recovering counts from printed rates --------------------------------------------------------


def recover_counts(accepted: int, generated: int, mean_printed: str | None,
                   rates_printed: list[str] | None) -> Recovered:
    """Verification steps (and per-position counts) from the printed figures, by the recovery
    vLLM's reader uses (``sources.recovery``: llama.cpp formats mean len and per-position rates
    as vLLM does). The most tokens a draft carries is not printed (k unknown); per-position
    counts are kept only when exact."""
    rec = recovery.recover_counts(accepted, generated, mean_printed, rates_printed, None, k=None)
    if rec.approximate_positions:
        return rec._replace(per_position=None, approximate_positions=False)
    return rec


# -- log lines -----------------------------------------------------------------------------------


def looks_like(line: str) -> bool:
    """A llama.cpp speculative line: per-request acceptance, drafter statistics, or the
    ``speculative`` example's ``n_drafted =`` summary line."""
    return ((MARKER in line and "accepted" in line and "generated" in line) or STATS_MARKER in line
            or _SUMMARY_DRAFTED.match(line) is not None)


@dataclass
class _Entry:
    lineno: int
    timestamp: str | None
    slot: tuple[str, str] | None
    printed: dict[str, Any]
    rates: list[str] | None = None
    notes: list[str] = field(default_factory=list)


def parse_log(lines: Iterable[str], source: str) -> LogReading:
    """Windows of one llama.cpp log (line numbers 1-based); malformed lines are counted.

    - Per-request ``draft acceptance`` lines: one window each.
    - ``statistics <impl>:`` lines count the same drafts again, cumulatively since the server
      started, per drafter implementation: beside per-request lines they are only summarised in
      the notes (never added: that would count every draft twice). In a log without per-request
      lines, each implementation's lines become windows, the differences of its consecutive
      lines (cumulative, like vLLM V0); a drop means a restart and starts from zero again.
    - The ``speculative`` example's summary (``n_draft``, ``n_predict``, ``n_drafted``,
      ``n_accept``, ``accept``): one window per run.
    """
    reading = LogReading(engine=ENGINE)
    entries: list[_Entry] = []
    open_by_slot: dict[tuple[str, str], _Entry] = {}
    stats: list[tuple[int, str | None, str, AcceptanceProfile, dict[str, int]]] = []
    summary: dict[str, str] = {}  # the speculative example's summary being read
    summary_line = 0
    summaries: list[Window] = []
    for lineno, line in enumerate(lines, start=1):
        if STATS_MARKER not in line and (MARKER in line or PER_POS_MARKER in line
                                         or _SUMMARY_FIELD.match(line)) \
                and (why := huge_number(line)) is not None:
            reading.skipped.add(source, lineno, why)
            continue
        if STATS_MARKER in line:
            parsed = _parse_statistics(line)
            if parsed is None:
                reading.skipped.add(source, lineno, "statistics line without #gen/#acc drafts and "
                                                    "tokens (or more accepted than generated)")
            else:
                stats.append((lineno, _timestamp(line), *parsed))
            continue
        field_m = _SUMMARY_FIELD.match(line)
        if field_m:
            name, value = field_m.group(1), field_m.group(2)
            if name == "n_draft" and summary:
                _flush_summary(source, summary, summaries, reading, summary_line)
            summary[name] = value
            summary_line = lineno
            if name == "accept":
                _flush_summary(source, summary, summaries, reading, summary_line)
            continue
        if summary:
            _flush_summary(source, summary, summaries, reading, summary_line)
        slot_m = _SLOT.search(line)
        slot = (slot_m.group(1), slot_m.group(2)) if slot_m else None
        if MARKER not in line:
            if PER_POS_MARKER in line:
                target = open_by_slot.get(slot) if slot else (entries[-1] if entries else None)
                pos = _PER_POS.search(line)
                if target is None or target.rates is not None or pos is None:
                    reading.skipped.add(
                        source, lineno, "acc per pos line without its acceptance line"
                    )
                else:
                    target.rates = _rates(pos.group("pos"))
            continue
        m = _LINE.search(line)
        if m is None:
            reading.skipped.add(
                source, lineno, "draft acceptance line without (N accepted / N generated)"
            )
            continue
        acc, gen = int(m.group("acc")), int(m.group("gen"))
        if acc > gen:
            reading.skipped.add(source, lineno, f"{acc} accepted of only {gen} generated")
            continue
        printed: dict[str, Any] = {"rate": m.group("rate"), "accepted": acc, "generated": gen}
        rest = line[m.end():]
        mean = _MEAN.search(rest)
        if mean:
            printed["mean_len"] = mean.group("mean")
        entry = _Entry(lineno, _timestamp(line), slot, printed)
        pos = _PER_POS.search(rest)
        if pos:
            entry.rates = _rates(pos.group("pos"))
        rate = _float(m.group("rate"))
        if rate is None or (gen and abs(rate - acc / gen) > 5e-5):
            entry.notes.append(f"printed rate {m.group('rate')} disagrees with {acc}/{gen}")
        entries.append(entry)
        if slot:
            open_by_slot[slot] = entry
    if summary:
        _flush_summary(source, summary, summaries, reading, summary_line)
    for e in entries:
        reading.windows.append(_window(source, e))
    if entries and any(w.profile.drafts is None for w in reading.windows):
        reading.notes.append(
            "verification steps (drafts) are not printed; recovered where the mean length and "
            "per-position rates allow exactly one count, else given as the range they allow"
        )
    reading.windows.extend(summaries)
    if summaries:
        reading.notes.append(SUMMARY_NOTE)
    reading.method = _method_of_statistics(stats)
    if stats and not entries and not summaries:
        reading.windows.extend(_statistics_windows(source, stats, reading.notes))
        reading.cumulative = True
    else:
        reading.since_start = _since_start(stats)
        last = {name: (lineno, p) for lineno, _, name, p, _ in stats}
        for name, (lineno, p) in sorted(last.items()):
            reading.notes.append(
                f"statistics {name} (cumulative since server start, {source}:{lineno}; not added "
                f"to the per-request windows, which count the same drafts): {p.drafts} drafts, "
                f"{p.draft_tokens} draft tokens, {p.accepted_tokens} accepted"
            )
    reading.windows.sort(key=lambda w: w.line)
    return reading


SUMMARY_NOTE = ("speculative example summary: n_draft is the longest draft allowed (--draft, or "
                "where its heuristic left it), not a count of drafts; drafts are not printed")
_SUMMARY_FIELD = re.compile(r"^\s*(n_draft|n_predict|n_drafted|n_accept|accept)\s*=\s*(\S+?)%?\s*$")
_SUMMARY_DRAFTED = re.compile(r"^\s*n_drafted\s*=\s*\d+\s*$")


def _flush_summary(source: str, block: dict[str, str], out: list[Window], reading: LogReading,
                   lineno: int = 0) -> None:
    """The window of the summary read so far (emptied), or the skipped line saying why not;
    lines such as a lone ``n_draft = 16`` (a setting, not a summary) are dropped."""
    if "n_drafted" not in block and "n_accept" not in block:
        block.clear()
        return
    w = _summary_window(source, lineno, block)
    if isinstance(w, str):
        reading.skipped.add(source, lineno, w)
    else:
        out.append(w)
    block.clear()


def _summary_window(source: str, lineno: int, block: dict[str, str]) -> Window | str:
    """The window of one ``speculative`` example summary, or why it cannot be read."""
    try:
        drafted, accepted = int(block["n_drafted"]), int(block["n_accept"])
    except (KeyError, ValueError):
        return "speculative summary without integer n_drafted and n_accept"
    if accepted > drafted:
        return f"speculative summary: {accepted} accepted of only {drafted} drafted"
    profile = AcceptanceProfile(drafts=None, draft_tokens=drafted, accepted_tokens=accepted,
                                notes=("drafts not printed by the speculative example",))
    return Window(ENGINE, source, lineno, profile, None, printed=dict(block))


def drafter_method(name: str) -> str | None:
    """The method a drafter implementation's name in a ``statistics`` line stands for, in vLLM's
    names (``draft-mtp``, ``mtp`` → mtp; ``ngram-mod``, ``ngram_map_k`` → ngram; ``draft`` →
    draft_model; ...); None for names not known here."""
    n = name.lower().replace("_", "-")
    for part, method in (("mtp", "mtp"), ("eagle3", "eagle3"), ("dflash", "dflash")):
        if part in n:
            return method
    if n.startswith("ngram"):
        return "ngram"
    return "draft_model" if n == "draft" else None


def _method_of_statistics(stats: list[tuple[int, str | None, str, AcceptanceProfile,
                                            dict[str, int]]]) -> str | None:
    """The method of the one drafter implementation that drafted anything, if only one did."""
    drafting = {name for _, _, name, p, _ in stats if p.drafts}
    methods = {drafter_method(name) for name in drafting}
    return methods.pop() if len(methods) == 1 else None


def _since_start(stats: list[tuple[int, str | None, str, AcceptanceProfile, dict[str, int]]]
                 ) -> AcceptanceProfile | None:
    """Every drafter's last statistics line added up: counted, cumulative since start."""
    if not stats:
        return None
    last = {name: p for _, _, name, p, _ in stats}
    total = sum_profiles([replace(p, notes=()) for p in last.values()])
    return replace(total, notes=(
        "from the drafters' statistics lines (" + ", ".join(sorted(last)) + "): cumulative since "
        "the server started, not only the requests of this log",))


def _statistics_windows(source: str, stats: list[tuple[int, str | None, str, AcceptanceProfile,
                                                          dict[str, int]]],
                        notes: list[str]) -> list[Window]:
    """Each implementation's consecutive ``statistics`` lines as differences (cumulative)."""
    prev: dict[str, dict[str, int]] = {}
    out: list[Window] = []
    for lineno, ts, name, _, values in stats:
        before = prev.get(name)
        if before is not None and any(values[key] < before[key] for key in values):
            notes.append(f"{source}:{lineno}: statistics {name} went down: the server restarted; "
                         "counting from zero again")
            before = None
        base = before or dict.fromkeys(values, 0)
        d = {key: values[key] - base[key] for key in values}
        prev[name] = values
        if d["drafts"] == 0 and d["draft_tokens"] == 0:
            continue  # this implementation drafted nothing since its previous line
        profile = AcceptanceProfile(drafts=d["drafts"], draft_tokens=d["draft_tokens"],
                                    accepted_tokens=d["accepted"])
        out.append(Window(ENGINE, source, lineno, profile, ts,
                          printed={"implementation": name, **values}))
    notes.append("no per-request lines: windows are the differences of each drafter's "
                 "cumulative statistics lines (" + ", ".join(sorted(prev)) + ")")
    return out


def _window(source: str, e: _Entry) -> Window:
    acc, gen = int(e.printed["accepted"]), int(e.printed["generated"])
    if e.rates is not None:
        e.printed["per_position"] = list(e.rates)
    rec = recover_counts(acc, gen, e.printed.get("mean_len"), e.rates)
    profile = AcceptanceProfile(
        drafts=rec.drafts,
        draft_tokens=gen,
        accepted_tokens=acc,
        accepted_per_position=rec.per_position,
        k=len(e.rates) if e.rates else None,
        notes=tuple(e.notes) + recovery_notes(rec),
        drafts_range=rec.drafts_range,
    )
    if e.slot:
        e.printed["slot"], e.printed["task"] = int(e.slot[0]), int(e.slot[1])
    return Window(ENGINE, source, e.lineno, profile, e.timestamp, printed=e.printed)


def _parse_statistics(line: str) -> tuple[str, AcceptanceProfile, dict[str, int]] | None:
    name = _STATS_NAME.search(line)
    values: dict[str, int] = {}
    for key, rx in _STATS_FIELDS.items():
        m = rx.search(line)
        if m is None:
            return None
        if huge_number(m.group(1)) is not None:
            return None
        values[key] = int(m.group(1))
    if name is None or values["accepted"] > values["draft_tokens"]:
        return None
    per_pos: tuple[int, ...] | None = None
    pos = _PER_POS.search(line)
    if pos and values["drafts"]:
        fit = recovery.positions_for(values["drafts"], values["accepted"], _rates(pos.group("pos")))
        if fit is not None and not fit[1] and fit[0] and fit[0][0] == values["drafts_accepted"]:
            per_pos = fit[0]
    profile = AcceptanceProfile(
        drafts=values["drafts"],
        draft_tokens=values["draft_tokens"],
        accepted_tokens=values["accepted"],
        accepted_per_position=per_pos,
        k=len(per_pos) if per_pos else None,
        notes=(f"drafts with at least one token accepted: {values['drafts_accepted']}",),
    )
    return name.group(1), profile, values


def statistics_totals(lines: Iterable[str]) -> dict[str, AcceptanceProfile]:
    """The last ``statistics <drafter>:`` line of each drafter: counted, cumulative since start."""
    out: dict[str, AcceptanceProfile] = {}
    for line in lines:
        if STATS_MARKER in line:
            parsed = _parse_statistics(line)
            if parsed is not None:
                out[parsed[0]] = parsed[1]
    return out


def _rates(text: str) -> list[str]:
    return [r.strip() for r in text.split(",") if r.strip()]


def _timestamp(line: str) -> str | None:
    m = _TIMESTAMP.search(line)
    return m.group(1) if m else None


def _float(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


# -- response timings ----------------------------------------------------------------------------


def request_steps(completion_tokens: int, accepted: int, drafted: int) -> int:
    """A llama-server request's verification steps, which its response does not count (pure):
    each step after the first token yields the accepted tokens plus one, so ``n`` completion
    tokens with ``a`` accepted took ``n - 1 - a`` steps; none where nothing was drafted."""
    return max(completion_tokens - 1 - accepted, 0) if drafted else 0


def profile_from_timings(response: Mapping[str, Any]) -> AcceptanceProfile:
    """One request's profile from a parsed response (or its ``timings`` object).

    Counted: draft tokens and accepted draft tokens. The verification-step count is not in the
    response, so the mean acceptance length is unknown.
    """
    timings = response.get("timings", response)
    if not isinstance(timings, Mapping) or "draft_n" not in timings:
        raise InputError(
            "the response has no timings.draft_n: speculative decoding is off, or the server "
            "predates ggml-org/llama.cpp#12603 (2025-03), or this is not a stream's final chunk",
            "start llama-server with a draft model (-md) or --spec-type; read the final response",
        )
    draft_n = _nonneg_int(timings, "draft_n")
    accepted = _nonneg_int(timings, "draft_n_accepted") if "draft_n_accepted" in timings else None
    if accepted is None:
        raise InputError("timings.draft_n without timings.draft_n_accepted",
                         "pass the response JSON unchanged")
    if accepted > draft_n:
        raise InputError(f"timings: {accepted} accepted of only {draft_n} drafted",
                         "pass the response JSON unchanged")
    return AcceptanceProfile(
        drafts=None,
        draft_tokens=draft_n,
        accepted_tokens=accepted,
        notes=("one request; verification steps are not in timings, so drafts are unknown",),
    )


def _nonneg_int(obj: Mapping[str, Any], key: str) -> int:
    value = obj[key]
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value < 0 or value != int(value)):
        raise InputError(f"timings.{key}={value!r} is not a count",
                         "pass the response JSON unchanged")
    return int(value)


# -- /metrics ------------------------------------------------------------------------------------

_PREFIX = "llamacpp:spec_decode_"
_NAMES = {
    "llamacpp:spec_decode_num_drafts": "drafts",
    "llamacpp:spec_decode_num_draft_tokens": "draft_tokens",
    "llamacpp:spec_decode_num_accepted_tokens": "accepted",
}
_PER_POS_NAME = "llamacpp:spec_decode_num_accepted_tokens_per_pos"


def profile_from_prometheus(text: str) -> AcceptanceProfile:
    """Counted profile from llama-server's spec-decode counters (cumulative since start).

    Series are summed (one per model in router mode). A run is the difference of two scrapes.
    """
    try:
        from prometheus_client.parser import text_string_to_metric_families  # only for /metrics

        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError) as exc:
        raise InputError(f"not Prometheus text exposition ({printable(str(exc))})",
                         "pass the body of llama-server's /metrics endpoint") from exc
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for fam in families:
        if not fam.name.startswith(_PREFIX):
            continue
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            base = s.name.removesuffix("_total")
            if base in _NAMES:
                totals[_NAMES[base]] = totals.get(_NAMES[base], 0.0) + count_of(s.value, s.name)
            elif base == _PER_POS_NAME and "position" in s.labels:
                if not s.labels["position"].isdigit():
                    raise InputError(f"{s.name}: position {printable(s.labels['position'])!r} is "
                                     "not a number", "pass the /metrics body unchanged")
                i = int(s.labels["position"])
                per_pos[i] = per_pos.get(i, 0.0) + count_of(s.value, s.name)
    if not totals:
        raise InputError(
            "no llamacpp:spec_decode_* counters in this metrics text",
            "start llama-server with --metrics and a drafter (-md or --spec-type); servers before "
            "ggml-org/llama.cpp#26389 (2026-07-31) do not export them: read the log lines or the "
            "response timings instead",
        )
    k = max(per_pos) + 1 if per_pos else None
    notes = ["cumulative since server start: a run is the difference of two scrapes"]
    if not per_pos:
        notes.append("no per-position counters (exported only after the first speculative request)")
    return AcceptanceProfile(
        drafts=_int(totals.get("drafts")),
        draft_tokens=_int(totals.get("draft_tokens")),
        accepted_tokens=_int(totals.get("accepted")),
        accepted_per_position=tuple(int(per_pos.get(i, 0)) for i in range(k)) if k else None,
        k=k,
        notes=tuple(notes),
    )


def _int(x: float | None) -> int | None:
    return None if x is None else int(x)


def _parse(lines: Iterable[str], source: str, options: ReadOptions) -> LogReading:
    return parse_log(lines, source)


SOURCE = LineSource(ENGINE, ("llamacpp:spec_decode",), (MARKER, STATS_MARKER, "n_drafted"),
                    looks_like, _parse, profile_from_prometheus,
                    serving_markers=("eval time =",))  # print_timing, every request
