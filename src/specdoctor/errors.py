"""Errors that specdoctor shows to the user: each names the problem and the fix; and the exit
status of every command (README, "Exit status"):

- 0: done;
- 1: the check ran and found what it checks for (`kernels check`, `taps check`, `astexec`);
- 2: bad input: a file, flag or value that cannot be used as given (``InputError``);
- 3: the target is unreachable or not speculating, or a measurement failed partway (what was
  measured is stored) (``TargetError``);
- 4: the lab could not be installed, started or stopped (``LabError``);
- 5: the diagnosis broke partway; what it found is saved (``DiagnosisFailed``);
- 70: an internal error (a bug in specdoctor), said in one line;
- 130: interrupted (Ctrl-C); 128 + N when stopped by signal N.
"""

from __future__ import annotations

DONE, FOUND, BAD_INPUT, UNREACHABLE, LAB, DIAGNOSIS_FAILED, INTERNAL = 0, 1, 2, 3, 4, 5, 70


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
