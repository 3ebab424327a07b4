"""What a diagnosis takes from server logs: the profile its signature reads, the windows over
uptime, the method and k, and what the log shows when speculation was off.

``read_for_diagnosis`` reads the logs as ``specdoctor logs`` does (``sources.logs``) and
decides, in this one place, which of their figures the signature gets:

- the windows' total, when it holds an exact draft count;
- else llama-server's drafter statistics since the server started (exact counts), when the log
  has them: its per-request lines without a mean length leave accepted per draft a wide range;
- else the windows' total as it is: a range where the draft count is not printed, compared by
  its bounds (``diagnose.signature``), never read as zero.

Logs of several servers (files or parts of a file with their own engine, method or k:
``sources.logs``) give no profile, whatever their order: each one's figures are in the notes
(``diagnose --logs`` refuses them together and diagnoses each apart with ``--by-file``). A log of a server that served without speculation gives
``speculation_off``. The user's --method and --k win over what the log says, with a note where
they differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.errors import SpecdoctorError, SpeculationOff
from specdoctor.sources.logs import LogTotal, differing_config, read_logs


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
        lt = read_logs([str(p) for p in paths], engine, keep_windows=False, last_windows=1,
                       k=k, by_file=True, uptime=True)
    except SpeculationOff as exc:
        return LogEvidence(speculation_off=exc.evidence, notes=[f"logs: {exc}"])
    except SpecdoctorError as exc:
        return LogEvidence(notes=[f"logs: {exc}"])
    return evidence_of(lt, method, k)


def evidence_of(lt: LogTotal, method: str | None = None, k: int | None = None) -> LogEvidence:
    """The evidence of logs already read (with ``by_file``): a pure function."""
    notes: list[str] = []
    profile, windows = lt.total, lt.uptime
    log_method = lt.reading.method
    mixed = differing_config(lt.files)
    if mixed:
        # several servers: which one is "the" server is not for the order of the names to
        # decide (diagnose --logs refuses them together; --by-file diagnoses each apart)
        each = "; ".join(f"{f.source}: {_figures(f.total)}" for f in lt.files if f.window_count)
        return LogEvidence(engine=lt.reading.engine, method=method, k=k, notes=[
            f"the logs hold several servers' windows ({mixed}): none is taken as the server's "
            f"(each one's figures: {each}); diagnose --logs … --by-file diagnoses each apart, "
            "specdoctor logs --by-file reads them apart"])
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


def _stated(given: object, found: object, what: str) -> list[str]:
    if given is None or found is None or given == found:
        return []
    return [f"the log says {what} {found}; using the {given} you gave"]
