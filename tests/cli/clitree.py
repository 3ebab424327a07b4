"""The real CLI as data, for tests that check text against it: every command path (`lab up`),
its click object and its flags. Read from `cli.main.COMMANDS` and click itself, so a command
merged later is checked with no change here."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache

import click

from specdoctor.cli.main import COMMANDS, cli


@dataclass(frozen=True)
class Cmd:
    path: tuple[str, ...]  # () is bare `specdoctor`
    command: click.Command

    @property
    def name(self) -> str:
        return " ".join(("specdoctor", *self.path))

    @property
    def flags(self) -> frozenset[str]:
        """Every long and short option spelling, --help included; an older spelling kept only
        as a hidden alias (``cli.options.Aliased``) is not one: text must use the current one."""
        out = {"--help"}
        for p in self.command.params:
            if isinstance(p, click.Option):
                out.update(p.opts)
                out.update(p.secondary_opts)
                out.difference_update(getattr(p, "hidden_opts", ()))
        return frozenset(out)

    @property
    def subcommands(self) -> dict[str, click.Command]:
        if isinstance(self.command, click.Group):
            return dict(self.command.commands)
        return {}


@cache
def commands() -> dict[tuple[str, ...], Cmd]:
    """Every command path of the CLI, the bare command and the groups included."""
    out: dict[tuple[str, ...], Cmd] = {(): Cmd((), cli)}

    def walk(path: tuple[str, ...], command: click.Command) -> None:
        out[path] = Cmd(path, command)
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk((*path, name), sub)

    for name, (module, attr, _) in COMMANDS.items():
        if importlib.util.find_spec(module) is None:
            continue  # listed in COMMANDS by a branch not merged yet
        walk((name,), getattr(importlib.import_module(module), attr))
    return out


def resolve(words: list[str]) -> tuple[Cmd | None, str]:
    """The command that WORDS (after `specdoctor`) name, and what is wrong if none: the
    longest prefix of words that is a command path; a group must be followed by a subcommand
    or be used alone."""
    cmds = commands()
    path: tuple[str, ...] = ()
    for w in words:
        nxt = (*path, w)
        if nxt in cmds:
            path = nxt
            continue
        if path and isinstance(cmds[path].command, click.Group):
            return None, f"`{' '.join(path)}` has no subcommand {w!r} " \
                         f"(it has: {', '.join(sorted(cmds[path].subcommands))})"
        if not path:
            return None, f"no command {w!r} (commands: {', '.join(sorted(c[0] for c in cmds if len(c) == 1))})"
        break
    return cmds[path], ""
