"""`specdoctor astexec FILE NAME... [--config config.json] [--call EXPR] [--stub NAME=VALUE|raise]`.

    specdoctor astexec vllm.model_executor.models.qwen3_dflash \\
        _dflash_layer_causal _resolve_layer_attention \\
        --config drafter/config.json --stub get_current_vllm_config=raise \\
        --call '[_resolve_layer_attention(config, i) for i in range(config.num_hidden_layers)]'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specdoctor.experiments.astexec.run import astexec as run_astexec
from specdoctor.cli.options import example, json_option
from specdoctor.experiments.astexec.sandbox import SandboxLimits
from specdoctor.report.console import err_console


L = SandboxLimits()  # the defaults shown here are the sandbox's own


@click.command(epilog=example(
    "specdoctor astexec vllm.model_executor.models.qwen3_dflash _resolve_layer_attention "
    "--config drafter/config.json --call '_resolve_layer_attention(config, 0)'"))
@click.argument("file")
@click.argument("names", nargs=-1, required=True)
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A config.json, bound to `config` in --call expressions.")
@click.option("--config-class", default=None,
              help="Build `config` with this class (e.g. transformers.Qwen3Config) instead of "
                   "plain attributes; it is imported inside the sandbox.")
@click.option("--call", "calls", multiple=True,
              help="Python expression to evaluate; repeat the flag for more (an expression is "
                   "never split at its commas).")
@click.option("--stub", "stubs", multiple=True,
              help="NAME=raise (any use raises) or NAME=EXPRESSION; repeat the flag for more.")
@click.option("--timeout", type=float, default=L.timeout_s, show_default=True,
              help="Wall-clock seconds of the sandboxed run.")
@click.option("--memory-mb", type=int, default=L.memory_mb, show_default=True,
              help="Address-space limit of the sandboxed run.")
@json_option
def astexec(file: str, names: tuple[str, ...], config_path: Path | None, config_class: str | None,
            calls: tuple[str, ...], stubs: tuple[str, ...], timeout: float, memory_mb: int,
            as_json: bool) -> None:
    """Run the engine's own FUNC or Class.method definitions, cut out of FILE, with stubs.

    FILE is a .py path (a snapshot file is cited with its manifest) or an installed
    module's dotted name. Everything the cut uses but does not define is stubbed,
    including names used only in annotations. The code runs in a separate process
    with no network, an empty environment, and time and memory limits.
    """
    out = run_astexec(file, list(names), calls=list(calls), stubs=list(stubs),
                      config_path=config_path, config_class=config_class,
                      limits=SandboxLimits(timeout_s=timeout, memory_mb=memory_mb))
    if as_json:
        click.echo(json.dumps(out, indent=1))
    else:
        _print(out)
    raised = int(out["raised"])  # type: ignore[call-overload]
    if raised:
        err_console().print(f"{raised} of the calls or definitions raised (shown above); "
                            "exit status 1", highlight=False)
        raise SystemExit(1)


def provenance_line(p: dict[str, Any]) -> str:
    """One line: where the file that ran comes from and whether it is still as recorded."""
    sha = str(p["sha256"])[:16]
    if p["kind"] == "snapshot":
        where = (f"snapshot {p['snapshot']}: {', '.join(p['packages'])} from {p['source']}, "
                 f"{p['path']}")
    elif p["kind"] == "installed":
        where = f"installed {p['distribution']} {p['version']}, {p['path']}"
    else:
        return f"sha256 {sha} (a file from no snapshot or installed distribution: unverified)"
    status = str(p["status"])
    if status.startswith("edited"):
        recorded = str(p["recorded_sha256"])[:16]
        return (f"[red]{escape(status)}[/red]: ran sha256 {sha}, recorded {recorded} "
                f"({escape(where)})")
    return f"{escape(where)}; sha256 {sha}, {escape(status)}"


def _print(out: dict[str, Any]) -> None:
    con = Console()
    con.print(f"[bold]{escape(str(out['module'] or out['file']))}[/bold]", highlight=False)
    con.print(provenance_line(out["provenance"]), highlight=False)
    defs = Table(title="definitions run", title_justify="left")
    for col in ("name", "kind", "lines", "sha256"):
        defs.add_column(col)
    for d in out["definitions"]:  # type: ignore[attr-defined]
        defs.add_row(d["name"], d["kind"], f"{d['lines'][0]}–{d['lines'][1]}", d["sha256"][:12])
    con.print(defs)
    for err in out["definition_errors"]:  # type: ignore[attr-defined]
        con.print(f"defining {err['name']} failed: {err['type']}: {err['message']}", style="red",
                  markup=False)
    for call in out["calls"]:  # type: ignore[attr-defined]
        con.print(f">>> {call['expr']}", style="cyan", highlight=False, markup=False)
        if "error" in call:
            e = call["error"]
            at = f" at line {e['at']['line']}: {e['at']['code']}" if e.get("at") else ""
            con.print(f"{e['type']}: {e['message']}{at}", style="red", highlight=False,
                      markup=False)
        else:
            con.print(json.dumps(call["value"]), highlight=False, markup=False)
    stubs = Table(title="stubs", title_justify="left")
    for col in ("name", "needed for", "mode", "loaded at def", "used"):
        stubs.add_column(col)
    for name, s in out["stubs"].items():  # type: ignore[attr-defined]
        uses = escape(", ".join(f"{u['path']} ({u['op']})" for u in s["uses"][:3]) or "never")
        if s["raised"]:
            uses = f"[red]RAISED[/red] {uses}"
        stubs.add_row(name, ", ".join(s["needed_for"]), s["mode"],
                      "yes" if s["loaded_at_def"] else "no", uses)
    con.print(stubs)
    iso = out["isolation"]
    con.print(f"[dim]sandbox: user {iso.get('user', '?')}, network {iso['network']}, "  # type: ignore[union-attr]
              f"empty env, {iso['memory_mb']} MiB, "  # type: ignore[index]
              f"{iso['timeout_s']:.0f} s[/dim]")  # type: ignore[index]
