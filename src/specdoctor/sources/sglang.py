"""SGLang's acceptance figures → acceptance profiles: log lines, ``/server_info``, ``/metrics``.

What SGLang counts (read in sgl-project/sglang, python/sglang/srt/managers/
scheduler_components/metrics_reporter.py and its predecessors managers/scheduler_metrics_mixin.py
and observability/scheduler_metrics_mixin.py):

- ``update_spec_metrics(bs, num_correct_drafts)`` adds ``num_correct_drafts + bs`` to the accept
  tokens and ``bs`` to the forward count: per request and verification step, one forward and its
  accepted draft tokens *plus the bonus token*. So ``accept len`` = accept tokens / forward count
  = 1 + accepted / drafts: vLLM's mean acceptance length, bonus counted, never below 1.
- The ``Decode batch`` log line prints that ratio for the window since the previous line (every
  ``--decode-log-interval`` batches, default 40), then resets the window: lines carry rates, not
  counts. Only the logging rank (attention-TP rank 0) prints; with data-parallel attention each DP
  rank prints its own lines (``[... DP3 TP3]``).
- ``accept rate`` changed definition between versions; the line does not say which one it uses:
  * before sgl-project/sglang#11572 (Oct 2025) it could exceed 1;
  * then (seen in a March 2026 log, #21723) accept tokens / (forwards × num_draft_tokens) =
    accept len / num_draft_tokens, which counts the bonus token and the root;
  * now accepted drafts / (forwards × (num_draft_tokens − 1)) — bonus and root excluded, the
    same as this toolkit's acceptance rate for chain drafting.
  It is therefore never used as the acceptance rate. For chain drafting with k known, the
  acceptance rate is (accept len − 1) / k, exact because every step proposes k tokens; the
  printed rate is kept and classified against both definitions in ``Window.printed``.
- Prometheus gauges ``sglang:spec_accept_length`` and ``sglang:spec_accept_rate``
  (observability/metrics_collector.py, ``multiprocess_mode="mostrecent"``) are set from the same
  window at each decode log: a scrape reads the latest window only, not a run. The HELP text names
  the rate's definition ("accepted drafts / proposed drafts" now; "accepted tokens / total draft
  tokens" before), so only the current definition is taken as an acceptance rate.
- ``/server_info`` → ``internal_states[i]`` (one entry per DP rank):
  ``avg_spec_accept_length`` = ``spec_total_num_accept_tokens / spec_total_num_forward_ct``
  (managers/scheduler.py, ``get_internal_state``): the same bonus-counted ratio, accumulated only
  when a decode line is logged, and reset by ``set_internal_state`` and ``flush_cache`` — "since
  start" only if neither was called. Newer versions add the raw pair
  ``spec_cumulative_num_accept_tokens`` / ``spec_cumulative_num_forward_ct`` (with
  ``spec_counter_dp_rank``), which ``set_internal_state`` does not reset (upstream test
  ``TestSpecCumulativeServerInfo``); the code that feeds them was not in the source snapshot
  read here, so their meaning is taken from their names and that test: accept tokens include the
  bonus token, as in ``update_spec_metrics``. Hence drafts = forward count and accepted draft
  tokens = accept tokens − forward count.
- ``--speculative-num-draft-tokens`` counts the root (the last verified token): with chain
  drafting (``--speculative-eagle-topk 1``) SGLang forces it to ``num_steps + 1``
  (server_args.py), so k = num_draft_tokens − 1 = num_steps. With topk > 1 it is a tree-node
  budget, not a depth, and k is left unknown.

Counting rules:

- Never average averages when counts exist: ``/server_info`` counters are summed over DP ranks.
- Log lines and gauges have no counts: their profiles are rate-only (``count_weighted=False``);
  an aggregate of them is an unweighted mean of rates and is flagged as such.
- Counts are recovered from rates only when exact; SGLang's rates never allow it, so they are not.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any


from specdoctor.acceptance.profile import AcceptanceProfile, sum_profiles
from specdoctor.errors import InputError
from specdoctor.sources.base import huge_number, printable, LineSource, LogReading, ReadOptions, Window

ENGINE = "sglang"
MARKER = "Decode batch"
_SERVER_ARGS_MARKER = "server_args=ServerArgs("
# Lines a log scanner must keep: metrics lines and the start-up line that names k.
MARKERS = (MARKER, _SERVER_ARGS_MARKER)

RATE_ONLY_NOTE = (
    "SGLang log lines carry rates, not counts: a total over windows is an unweighted mean of "
    "per-window rates, not weighted by drafts (count_weighted=false)"
)

_TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)")
_RANKS = re.compile(r"\b((?:DP|TP|PP|EP|CP)\d+)\b")
_ITER = re.compile(r"^\s*\[\d+\]")
_SERVER_ARG = re.compile(
    r"\b(speculative_(?:algorithm|num_steps|eagle_topk|num_draft_tokens))=([^,)]+)"
)


# -- k ------------------------------------------------------------------------------------------


def chain_k(num_draft_tokens: int) -> int:
    """k for chain drafting (topk = 1): num_draft_tokens counts the root, so k = n − 1."""
    if num_draft_tokens < 2:
        raise ValueError(
            f"speculative_num_draft_tokens={num_draft_tokens}: it counts the root token, so a "
            "draft needs at least 2"
        )
    return num_draft_tokens - 1


def k_from_server_args(args: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """(k, note) from SGLang server args (``/server_info`` keys or a logged ``ServerArgs``).

    k is the number of draft tokens proposed per step, for chain drafting only. The note says
    why k is unknown, or that SGLang overrode the configured num_draft_tokens.
    """
    algorithm = _arg(args.get("speculative_algorithm"))
    if algorithm is None:
        return None, "speculative_algorithm is not set: speculative decoding is off"
    if str(algorithm).upper() in {"NGRAM", "LOOKAHEAD"}:
        return None, f"{algorithm} drafts are trees of variable size: k is not defined"
    topk, steps, ndt = (_int_arg(args.get(f"speculative_{n}"))
                        for n in ("eagle_topk", "num_steps", "num_draft_tokens"))
    if topk is None:
        return None, "speculative_eagle_topk is not known: cannot tell chain from tree drafting"
    if topk > 1:
        return None, (f"tree drafting (topk={topk}): num_draft_tokens={ndt} is a node "
                      f"budget, depth num_steps={steps}; k (a chain length) is not defined")
    if steps is not None:
        note = None
        if ndt is not None and ndt != steps + 1:
            note = (f"num_draft_tokens={ndt} is overridden by SGLang to num_steps + 1 = "
                    f"{steps + 1} when topk == 1")
        return steps, note
    if ndt is not None:
        return chain_k(ndt), None
    return None, "neither speculative_num_steps nor speculative_num_draft_tokens is known"


def _arg(value: Any) -> Any:
    if value is None or (isinstance(value, str) and value.strip("'\" ") in {"", "None"}):
        return None
    return value.strip("'\" ") if isinstance(value, str) else value


def _int_arg(value: Any) -> int | None:
    value = _arg(value)
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# SGLang's --speculative-algorithm, as the methods are named elsewhere here (vLLM's names):
# NEXTN is DeepSeek's multi-token prediction head, STANDALONE a separate draft model.
METHODS = {"NEXTN": "mtp", "EAGLE": "eagle", "EAGLE3": "eagle3", "STANDALONE": "draft_model",
           "NGRAM": "ngram"}


def method_of(args: Mapping[str, Any]) -> str | None:
    """The method a ``speculative_algorithm`` names, in vLLM's names (None: off or unknown)."""
    algorithm = _arg(args.get("speculative_algorithm"))
    return METHODS.get(str(algorithm).upper()) if algorithm is not None else None


# -- log lines ----------------------------------------------------------------------------------


def looks_like(line: str) -> bool:
    """An SGLang scheduler ``Decode batch`` line (with or without speculative figures)."""
    return MARKER in line and "#running-req" in line


def parse_fields(text: str) -> dict[str, str]:
    """``key: value`` pairs of a ``Decode batch`` payload, by name (fields vary by version)."""
    text = _ITER.sub("", text.lstrip(".,"))
    out: dict[str, str] = {}
    for piece in text.split(","):
        key, sep, value = piece.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def classify_accept_rate(accept_len: float, accept_rate: float, k: int) -> str:
    """Which of SGLang's accept-rate definitions a printed (2-decimal) rate matches, for chain k."""
    slack = 0.0051 + 0.0051 / k
    drafts_only = abs(accept_rate - (accept_len - 1) / k) <= slack
    with_bonus = abs(accept_rate - accept_len / (k + 1)) <= slack
    if drafts_only and not with_bonus:
        return "accepted drafts / proposed drafts"
    if with_bonus and not drafts_only:
        return "accept len / num_draft_tokens (bonus and root counted)"
    return "ambiguous" if drafts_only else "unrecognised"


def parse_log(
    lines: Iterable[str], source: str, *, k: int | None = None
) -> LogReading:
    """Windows from SGLang ``Decode batch`` lines (line numbers 1-based), rate-only.

    ``k`` (draft tokens per step, chain drafting) is taken from the caller, else from the logged
    ``server_args=ServerArgs(...)`` line before the window (the first one for windows before
    any): a server restarted into the same log with another k logs its own. Lines that look like
    speculative metrics but cannot be read are counted in ``skipped``.
    """
    reading = LogReading(engine=ENGINE)
    pending: list[tuple[int, str | None, dict[str, str], float, int]] = []
    logged: list[int | None] = []   # k of each server_args line, in order
    k_notes: list[str] = []
    plain = 0
    for lineno, line in enumerate(lines, start=1):
        if _SERVER_ARGS_MARKER in line and k is None:
            args = dict(_SERVER_ARG.findall(line))
            if args:
                logged_k, k_note = k_from_server_args(args)
                logged.append(logged_k)
                method = method_of(args)
                if method is not None and method != reading.method:
                    reading.method = method
                    reading.methods.append((lineno, method))
                if k_note and k_note not in k_notes:
                    k_notes.append(k_note)
            continue
        i = line.find(MARKER)
        if i < 0:
            continue
        if (why := huge_number(line)) is not None:
            reading.skipped.add(source, lineno, why)
            continue
        fields = parse_fields(line[i + len(MARKER):])
        if "accept len" not in fields:
            if "accept rate" in fields:
                reading.skipped.add(source, lineno, "accept rate without accept len")
            elif "#running-req" in fields:
                plain += 1
            continue
        accept_len = _float(fields["accept len"])
        if accept_len is None:
            reading.skipped.add(
                source, lineno, f"accept len is not a number: {fields['accept len']!r}"
            )
            continue
        if accept_len < 1.0:
            reading.skipped.add(
                source, lineno, f"accept len {accept_len} is below 1 (it counts the bonus token)"
            )
            continue
        prefix = line[:i]
        fields["ranks"] = " ".join(_RANKS.findall(prefix))
        ts = _TIMESTAMP.search(prefix)
        pending.append((lineno, ts.group(1) if ts else None, fields, accept_len, len(logged) - 1))

    for lineno, ts, fields, accept_len, at in pending:
        k_here = k if k is not None else (logged[max(at, 0)] if logged else None)
        reading.windows.append(_window(source, lineno, ts, fields, accept_len, k_here))
    if reading.windows:
        reading.notes.append(RATE_ONLY_NOTE)
        if any(w.profile.k is None for w in reading.windows):
            reading.notes.append(
                "k unknown (the log has no server_args line with speculative_num_draft_tokens): "
                "acceptance rate not derived; SGLang's "
                "printed accept rate changed definition between versions and is kept as printed"
            )
        wrong = [w for w in reading.windows if w.profile.k is not None
                 and (w.profile.reported_mean_acceptance_length or 0.0) > w.profile.k + 1.005]
        if wrong:
            reading.notes.append(f"an accept len exceeds k + 1 = {wrong[0].profile.k + 1} "
                                 f"(line {wrong[0].line}): k is wrong")
    for k_note in k_notes if k is None else ():
        reading.notes.append(f"server_args in the log: {k_note}")
    reading.plain_lines = plain
    if plain:
        reading.notes.append(
            f"{plain} Decode batch line(s) without accept len: speculative decoding was off there"
        )
    return reading


def _window(
    source: str, lineno: int, ts: str | None, fields: dict[str, str], accept_len: float,
    k: int | None,
) -> Window:
    printed: dict[str, Any] = dict(fields)
    rate_printed = _float(fields.get("accept rate", ""))
    rate: float | None = None
    if k:
        # Chain drafting proposes k tokens every step, so accepted / proposed = (AL − 1) / k.
        rate = (accept_len - 1.0) / k
        if rate_printed is not None:
            printed["accept rate definition"] = classify_accept_rate(accept_len, rate_printed, k)
    profile = AcceptanceProfile(
        drafts=None,
        draft_tokens=None,
        accepted_tokens=None,
        k=k,
        reported_mean_acceptance_length=accept_len,
        reported_acceptance_rate=rate,
        count_weighted=False,
    )
    return Window(ENGINE, source, lineno, profile, ts, printed=printed)


def _float(text: str) -> float | None:
    try:
        x = float(text)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# -- /server_info --------------------------------------------------------------------------------


def profile_from_server_info(info: Mapping[str, Any]) -> AcceptanceProfile:
    """The acceptance profile of a ``/server_info`` (or ``/get_server_info``) JSON body.

    With the raw cumulative counters in every DP rank's state: a counted profile, summed over
    ranks, cumulative since start (a run is ``difference(after, before)``). Otherwise the
    ``avg_spec_accept_length`` of each rank: rate-only, averaged without weights if several.
    """
    states = info.get("internal_states")
    if states is None:
        states = [info]  # before sgl-project/sglang#6201 the state was at the top level
    if not isinstance(states, list) or not all(isinstance(s, Mapping) for s in states):
        raise InputError("server_info: internal_states is not a list of objects",
                         "pass the JSON body of GET /server_info unchanged")
    args: Mapping[str, Any] = info
    if "speculative_algorithm" not in info and states:
        args = states[0]
    k, k_note = k_from_server_args(args) if "speculative_algorithm" in args else (None, None)
    notes = [n for n in (k_note,) if n]

    keys = ("spec_cumulative_num_accept_tokens", "spec_cumulative_num_forward_ct")
    if states and all(all(key in s for key in keys) for s in states):
        accept = forward = 0
        for s in states:
            a, f = _count(s, keys[0]), _count(s, keys[1])
            if a < f:
                raise InputError(
                    f"server_info: {keys[0]}={a} is below {keys[1]}={f}",
                    "accept tokens include one bonus token per forward: pass the body unchanged",
                )
            accept, forward = accept + a, forward + f
        accepted = accept - forward  # remove the bonus token of each (request, step)
        notes.append("cumulative since server start: a run is the difference of two readings")
        if len(states) > 1:
            notes.append(f"summed over {len(states)} data-parallel ranks")
        return AcceptanceProfile(
            drafts=forward,
            draft_tokens=forward * k if k else None,
            accepted_tokens=accepted,
            k=k,
            notes=tuple(notes),
        )

    rates = [_avg(s) for s in states]
    per_rank = [
        AcceptanceProfile(None, None, None, k=k, reported_mean_acceptance_length=r,
                          reported_acceptance_rate=(r - 1.0) / k if k else None,
                          count_weighted=False)
        for r in rates if r is not None
    ]
    if not per_rank:
        raise InputError(
            "server_info has no avg_spec_accept_length: speculative decoding is off, or no "
            "decode batch has been logged yet",
            "start SGLang with --speculative-algorithm, send some requests, and read again",
        )
    notes.append("avg_spec_accept_length: since start or the last flush_cache or "
                 "set_internal_state, updated only when a decode line is logged; rate-only")
    profile = per_rank[0] if len(per_rank) == 1 else sum_profiles(per_rank)
    if len(per_rank) > 1:
        notes.append(f"unweighted mean over {len(per_rank)} data-parallel ranks")
    return replace(profile, k=k, notes=tuple(notes) + profile.notes)


def _count(state: Mapping[str, Any], key: str) -> int:
    value = state[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _whole(value):
        raise InputError(f"server_info: {key}={value!r} is not a count",
                         "pass the JSON body of GET /server_info unchanged")
    return int(value)


def _whole(value: float) -> bool:
    return math.isfinite(value) and value >= 0 and value == int(value)


def _avg(state: Mapping[str, Any]) -> float | None:
    value = state.get("avg_spec_accept_length")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if value >= 1.0 else None


# -- Prometheus gauges ---------------------------------------------------------------------------

_AL, _RATE = "sglang:spec_accept_length", "sglang:spec_accept_rate"
_STEPS, _NDT = "sglang:spec_num_steps", "sglang:spec_num_draft_tokens"
_RANK_LABELS = ("tp_rank", "pp_rank", "moe_ep_rank")
_DRAFTS_ONLY_HELP = "accepted drafts / proposed drafts"


def profile_from_prometheus(text: str) -> AcceptanceProfile:
    """Rate-only profile from SGLang's spec-decode gauges (the latest logged window only).

    One series per data-parallel group is read (the lowest ``tp_rank``, the one that logs);
    several groups are averaged without weights and flagged.
    """
    gauges: dict[str, dict[tuple[tuple[str, str], ...], tuple[int, float]]] = {}
    helps: dict[str, str] = {}
    try:
        from prometheus_client.parser import text_string_to_metric_families  # only for /metrics

        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError) as exc:
        raise InputError(f"not Prometheus text exposition ({printable(str(exc))})",
                         "pass the body of SGLang's /metrics endpoint") from exc
    for fam in families:
        name = fam.name
        if name.startswith("sglang_"):  # an exporter that rewrites ':' to '_'
            name = "sglang:" + name[len("sglang_"):]
        if name not in (_AL, _RATE, _STEPS, _NDT):
            continue
        helps[name] = fam.documentation or ""
        for s in fam.samples:
            group = tuple(sorted((k, v) for k, v in s.labels.items() if k not in _RANK_LABELS))
            tp = _int_arg(s.labels.get("tp_rank")) or 0
            held = gauges.setdefault(name, {}).get(group)
            if held is None or tp < held[0]:
                gauges[name][group] = (tp, s.value)
    if _AL not in gauges:
        raise InputError(
            "no sglang:spec_accept_length gauge in this metrics text",
            "start SGLang with --enable-metrics and --speculative-algorithm; for vLLM or "
            "llama.cpp pass their engine",
        )
    rate_help = helps.get(_RATE, "")
    rate_usable = _DRAFTS_ONLY_HELP in rate_help
    profiles: list[AcceptanceProfile] = []
    notes: list[str] = ["gauges hold the latest decode-log window only, not a run"]
    for group, (_, al) in sorted(gauges[_AL].items()):
        if not math.isfinite(al) or al < 1.0:
            continue  # 0 before the first decode log, or with speculative decoding off
        steps = _gauge_int(gauges, _STEPS, group)
        ndt = _gauge_int(gauges, _NDT, group)
        k = steps if steps and ndt == steps + 1 else None
        rate = gauges.get(_RATE, {}).get(group, (0, None))[1]
        usable = rate_usable and rate is not None and 0.0 <= rate <= 1.0
        reported_rate = rate if usable else None
        profiles.append(AcceptanceProfile(None, None, None, k=k,
                                          reported_mean_acceptance_length=al,
                                          reported_acceptance_rate=reported_rate,
                                          count_weighted=False))
    if not profiles:
        raise InputError(
            "sglang:spec_accept_length is 0 in every series: speculative decoding is off, or no "
            "decode batch has been logged since start",
            "send some requests to the server and scrape /metrics again",
        )
    if _RATE in gauges and not rate_usable:
        notes.append("sglang:spec_accept_rate not used: its HELP text does not name the current "
                     "definition (accepted drafts / proposed drafts)")
    if len(profiles) > 1:
        merged = sum_profiles(profiles)
        notes.append(f"unweighted mean over {len(profiles)} data-parallel series")
        return replace(merged, notes=tuple(notes) + merged.notes)
    if profiles[0].k is None and profiles[0].reported_acceptance_rate is not None:
        notes.append("k unknown (tree drafting, or no spec_num_steps gauge): the rate is accepted "
                     "/ proposed draft tokens, not comparable with chain drafting at a given k")
    return replace(profiles[0], notes=tuple(notes))


def _gauge_int(gauges: dict[str, dict[Any, tuple[int, float]]], name: str, group: Any
               ) -> int | None:
    held = gauges.get(name, {}).get(group)
    if held is None or not _whole(held[1]):
        return None
    return int(held[1])


def _parse(lines: Iterable[str], source: str, options: ReadOptions) -> LogReading:
    return parse_log(lines, source, k=options.k)


SOURCE = LineSource(ENGINE, ("sglang:spec_", "sglang_spec_"), (MARKER,), looks_like, _parse,
                    profile_from_prometheus, splits_on_k=True, serving_markers=(MARKER,))
