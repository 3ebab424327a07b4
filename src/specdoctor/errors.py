"""Errors that specdoctor shows to the user: each names the problem and the fix."""

from __future__ import annotations


class SpecdoctorError(Exception):
    """An expected failure: printed as one line, never as a traceback."""

    exit_code = 2

    def __init__(self, problem: str, fix: str | None = None) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(problem if fix is None else f"{problem} — {fix}")


class InputError(SpecdoctorError):
    """The user's file, URL or arguments cannot be used as given."""


class SpeculationOff(InputError):
    """A log that shows the server serving requests and holds no speculative-decoding figure:
    speculation was off. ``evidence`` says what the log shows."""

    def __init__(self, problem: str, fix: str | None = None, evidence: str = "") -> None:
        super().__init__(problem, fix)
        self.evidence = evidence


class TargetError(SpecdoctorError):
    """The server under test is unreachable, or not speculating."""

    exit_code = 3


class LabError(SpecdoctorError):
    """The embedded lab could not be installed, started or stopped."""

    exit_code = 4
