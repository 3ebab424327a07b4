"""One grammar across the CLI, read from click itself (a command merged later is checked too):

- every command has `--json`, with one help text;
- every `--db` says the store's real default (`$SPECDOCTOR_HOME/specdoctor.db`, see paths.py);
- every `--method` is a validated choice;
- every repeatable option also takes commas (cli.options.list_option), unless its values hold
  commas of their own (listed below, each with why);
- the output folder is `-o/--out` and the ready timeout `--ready-timeout` wherever a command has
  one; older spellings parse but are not shown.
"""

from __future__ import annotations

import click
import pytest

from specdoctor.cli.options import DB_HELP, JSON_HELP, Aliased, list_option
from tests.cli.clitree import commands

# Repeatable options whose single values contain commas, so commas cannot separate them.
OWN_GRAMMAR = {
    "--call": "a Python expression",
    "--stub": "NAME=EXPRESSION",
    "--convention": "IMPL=W,one-sided,<=",
    "--env": "NAME=VALUE, split only before the next NAME=",
    "--sampling": "a T,top_p pair stays one value",
    "--devices": "'0,1 2,3': commas inside a device set, spaces between sets",
    "--flag": "NAME=V1,V2: the commas separate one server flag's values",
}
# Old names of -o/--out and --ready-timeout, and the commands where one of them means something
# else (no output folder, no server start), kept as their users know them.
OLD_NAMES = {"--report-dir", "--save", "--timeout"}
OTHER_MEANING = {
    ("astexec",): {"--timeout"},       # seconds one call may run
    ("probe", "run"): {"--timeout"},   # seconds the wrapped command may run
    ("gate",): {"--save"},             # --save NAME stores a bench run as a named baseline
}
LEAVES = {p: c for p, c in commands().items() if p and not isinstance(c.command, click.Group)}
_LIST_CALLBACK = list_option("--x")(lambda x: None).__click_params__[0].callback.__qualname__


def _options(cmd: click.Command) -> list[click.Option]:
    return [p for p in cmd.params if isinstance(p, click.Option)]


@pytest.mark.parametrize("path", sorted(LEAVES), ids=" ".join)
def test_one_grammar(path):
    cmd = LEAVES[path].command
    opts = {o.opts[-1] if o.opts[-1].startswith("--") else o.opts[0]: o for o in _options(cmd)}
    by_flag = {f: o for o in _options(cmd) for f in o.opts}
    assert "--json" in by_flag and by_flag["--json"].help == JSON_HELP, "--json"
    if "--db" in by_flag:
        assert by_flag["--db"].help == DB_HELP
    if "--method" in by_flag:
        t = by_flag["--method"].type
        cb = by_flag["--method"].callback
        assert isinstance(t, click.Choice) or (cb and cb.__qualname__ == _LIST_CALLBACK), \
            "--method is free text"
    for o in _options(cmd):
        flag = max(o.opts, key=len)
        if o.multiple and flag not in OWN_GRAMMAR:
            assert o.callback is not None and o.callback.__qualname__ == _LIST_CALLBACK, \
                f"{flag} repeats but does not take commas (use cli.options.list_option)"
        shown = set(o.opts) - set(getattr(o, "hidden_opts", ()))
        assert not shown & OLD_NAMES - OTHER_MEANING.get(path, set()), \
            f"{flag}: an old name of --out / --ready-timeout"
        if o.name == "out_dir":
            assert isinstance(o, Aliased) and {"-o", "--out"} <= shown
    assert opts  # every command has options to check


@pytest.mark.parametrize("path", sorted(LEAVES), ids=" ".join)
def test_a_number_of_seconds_is_never_nan(path):
    # click's FloatRange accepts nan, and a server waited for nan seconds is waited for forever
    timeouts = [o for o in _options(LEAVES[path].command)
                if o.name in ("ready_timeout", "request_timeout")]
    for o in timeouts:
        with pytest.raises(click.BadParameter, match="not a number of seconds"):
            o.type.convert("nan", o, None)
        assert o.type.convert("1.5", o, None) == 1.5


def test_the_check_sees_a_list_option_without_commas():
    @click.command()
    @click.option("--suite", multiple=True)
    @click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
    def cmd(suite, as_json):
        pass

    (suite,) = [o for o in cmd.params if o.name == "suite"]
    assert suite.callback is None  # what test_one_grammar refuses
