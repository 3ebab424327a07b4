"""What a diagnosis takes from server logs: the profile its signature reads, the windows over
uptime, the method and k, and what the log shows when speculation was off.

``read_for_diagnosis`` reads the logs as ``specdoctor logs`` does (``sources.logs``) and
decides, in this one place, which of their figures the signature gets:

- the windows' total, when it holds an exact draft count;
- else llama-server's drafter statistics since the server started (exact counts), when the log
  has them: its per-request lines without a mean length leave accepted per draft a wide range;
- else the windows' total as it is: a range where the draft count is not printed, compared by
  its bounds (``diagnose.signature``), never read as zero.

A log whose k (or method) changes holds several servers' windows, read in segments
(``sources.logs``): the signature is that of the last one, the server as it ran last, and each
segment's own figures are in the notes. A log of a server that served without speculation gives
``speculation_off``. The user's --method and --k win over what the log says, with a note where
they differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.errors import SpecdoctorError, SpeculationOff
from specdoctor.sources.logs import FileLog, LogTotal, differing_config, read_logs


@dataclass
class LogEvidence:
    """The log's part of a diagnosis' facts."""

    profile: AcceptanceProfile | None = None
    windows: tuple[AcceptanceProfile, ...] = ()
    method: str | None = None
    k: int | None = None
    engine: str | None = None
    speculation_off: str | None = None
    notes: list[str] = field(default_factory=list)


def read_for_diagnosis(paths: Sequence[str | Path], engine: str | None = None,
                       method: str | None = None, k: int | None = None) -> LogEvidence:
    """The logs' evidence (see the module doc); a log that cannot be read is a note."""
    try:
        lt = read_logs([str(p) for p in paths], engine, k=k, by_file=True)
    except SpeculationOff as exc:
        return LogEvidence(speculation_off=exc.evidence, notes=[f"logs: {exc}"])
    except SpecdoctorError as exc:
        return LogEvidence(notes=[f"logs: {exc}"])
    return evidence_of(lt, method, k)


def evidence_of(lt: LogTotal, method: str | None = None, k: int | None = None) -> LogEvidence:
    """The evidence of logs already read (with ``by_file``): a pure function."""
    notes: list[str] = []
    chosen: FileLog | None = None
    profile, windows = lt.total, tuple(w.profile for w in lt.reading.windows)
    log_method = lt.reading.method
    mixed = differing_config(lt.files)
    if mixed:
        chosen = next(f for f in reversed(lt.files) if f.window_count)
        profile, log_method = chosen.total, chosen.reading.method
        windows = tuple(w.profile for w in lt.reading.windows if _in(chosen, w.source, w.line))
        each = "; ".join(f"{f.source}: {_figures(f.total)}" for f in lt.files if f.window_count)
        notes.append(f"the logs hold several speculative configs ({mixed}): the signature is "
                     f"that of {chosen.source}, the last; each one's figures: {each} (specdoctor "
                     "logs --by-file reads them apart)")
    since = lt.reading.since_start
    if profile.drafts is None and since is not None and since.drafts:
        notes.append("the per-request lines print no draft count; the drafters' statistics lines "
                     f"do (cumulative since the server started: {since.drafts} drafts, "
                     f"{since.accepted_tokens} accepted of {since.draft_tokens} draft tokens): "
                     "the signature reads those")
        profile, windows = since, ()
    notes += _stated(method, log_method, "method") + _stated(k, profile.k, "k")
    return LogEvidence(profile=profile, windows=windows, method=method or log_method,
                       k=k if k is not None else profile.k, engine=lt.reading.engine, notes=notes)


def _figures(p: AcceptanceProfile) -> str:
    from specdoctor.diagnose.signature import apd_bounds, measured_words

    b = apd_bounds(p)
    return "accepted per draft not known" if b is None else measured_words(p, b)


def _in(f: FileLog, source: str, line: int) -> bool:
    return source == f.input and (f.lines is None or f.lines[0] <= line <= f.lines[1])


def _stated(given: object, found: object, what: str) -> list[str]:
    if given is None or found is None or given == found:
        return []
    return [f"the log says {what} {found}; using the {given} you gave"]
