"""Every command and flag that specdoctor's text tells a user to type exists in the real CLI.

The hints are collected from README.md, docs/*.md and every string in src/ (error fixes,
notes, help texts, messages; see tests/cli/hints.py for what counts as a hint) and checked
against the commands of `cli.main.COMMANDS` as click defines them, so commands merged later are
checked with no change here.
"""

from __future__ import annotations

import itertools
import warnings

import pytest

from tests.cli.clitree import Cmd, commands, resolve
from tests.cli.hints import Hint, _from_code, all_hints, reach

# Flags of the engines' own command lines, named when telling the user how to start a server.
ENGINE_FLAGS = frozenset({"--speculative-config", "--per-request-spec-decode-metrics",
                          "--disable-log-stats", "--model", "--tokenizer", "--enable-metrics",
                          "--speculative-num-draft-tokens", "--metrics", "--port", "--host",
                          "--max-model-len", "--draft-model", "--spec-type",
                          "--speculative-algorithm"})

# Hints that are wrong on this branch and fixed on the branch that owns their file; a listed
# hint that no longer occurs is reported (a warning) so the entry can go.
PENDING: dict[tuple[str, str], str] = {
}


def _top_commands() -> set[str]:
    return {p[0] for p in commands() if len(p) == 1}


def _problems(h: Hint, reached: dict[str, set[str]]) -> list[str]:
    cmds = commands()
    if h.bare_flag:  # h.words: the commands the string names
        owners = (reached.get(h.module or "") or _top_commands()) | set(h.words)
        pool = [c for p, c in cmds.items() if p and p[0] in owners]
        (flag,) = h.flags
        if flag in ENGINE_FLAGS or any(flag in c.flags for c in pool):
            return []
        return [f"{flag}: no such flag on {', '.join(sorted(owners))}"]
    found: list[Cmd] = []
    errors: list[str] = []
    for words in itertools.product(*(w.split("|") for w in h.words)):
        cmd, err = resolve(list(words))
        if cmd is None:
            errors.append(err)
        else:
            found.append(cmd)
    if errors:
        return errors
    flags = frozenset().union(*(c.flags for c in found))
    return [f"{f}: no such flag on {' / '.join(c.name for c in found)}"
            for f in h.flags if f not in flags]


def _pending(h: Hint, problem: str) -> bool:
    path = h.where.rsplit(":", 1)[0]
    return any(path == p and needle in problem for (p, needle) in PENDING)


def test_every_hint_names_a_command_and_flags_that_exist():
    hints = all_hints(_top_commands())
    assert len(hints) > 100  # README, docs and src all contribute
    reached = reach()
    bad, pending_seen = [], set()
    for h in hints:
        for problem in _problems(h, reached):
            if _pending(h, problem):
                pending_seen.update(k for k in PENDING if k[0] == h.where.rsplit(":", 1)[0])
                continue
            bad.append(f"{h.where}: {problem}   [{h.text[:90]}]")
    assert not bad, "hints that name what does not exist:\n" + "\n".join(sorted(set(bad)))
    for key in set(PENDING) - pending_seen:
        warnings.warn(f"PENDING hint {key} no longer occurs: remove it from PENDING", stacklevel=1)


@pytest.mark.parametrize("text, problem", [
    ("run: specdoctor masks check --window 4", "has no subcommand 'check'"),
    ("`specdoctor diagnoze`", "no command 'diagnoze'"),
    ("fix: specdoctor logs --k 4 server.log", "--k: no such flag on specdoctor logs"),
    ("see `lab up --methd ngram`", "--methd: no such flag on specdoctor lab up"),
    ("run: specdoctor measure --url U --launch 'vllm serve M --model M'", "--launch: no such flag"),
])
def test_the_check_catches_what_it_is_for(text, problem):
    # a wrong hint of each kind is reported: the collector finds it and the CLI refutes it
    hints = list(_from_code(text, "x.py:1", _top_commands(), require_lead=True))
    assert hints, text
    found = [p for h in hints for p in _problems(h, {})]
    assert any(problem in p for p in found), found


def test_prose_placeholders_and_quoted_engine_flags_are_not_hints():
    top = _top_commands()
    for text in ("the log that specdoctor reads, as specdoctor measures it",
                 "--launch: specdoctor starts it on a free port",
                 "resume with: specdoctor X --resume X"):
        assert list(_from_code(text, "x.py:1", top, require_lead=True)) == [], text
    (h,) = _from_code("run: specdoctor measure --url U 'vllm serve --model M -m x'", "x.py:1",
                      top, require_lead=True)
    assert h.flags == ("--url",)
