"""`specdoctor cache scan|ab`: vLLM's compile cache, read-only scan and the clean-cache A/B.

    specdoctor cache scan [ROOT] --log server.log …
    specdoctor cache ab --port 8000 -- python -m vllm.entrypoints.openai.api_server --port 8000 …
    specdoctor cache ab --lab dflash --control pos0
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import click

from specdoctor.cli.options import example, json_option, list_option, ready_timeout_option
from specdoctor.errors import InputError, TargetError
from specdoctor.lab.lab import METHODS as LAB_METHODS
from specdoctor.experiments.compile_cache import ab as abmod
from specdoctor.experiments.compile_cache import scan as scanmod
from specdoctor.launch.servers import READY_TIMEOUT_S
from specdoctor.report.console import err_console


@click.group(epilog=example(
    "specdoctor cache scan ~/.cache/vllm --log server.log"))
def cache() -> None:
    """vLLM's compile cache: what is in it, and does a fresh one change acceptance?
    """


@cache.command(epilog=example(
    "specdoctor cache scan --log server-k4.log,server-k6.log --json"))
@click.argument("root", type=click.Path(path_type=Path), required=False)
@list_option("--log", "logs", kind=Path, files=True, metavar="FILE",
             help="Server start-up logs: which launch saved or loaded what.")
@json_option
def scan(root: Path | None, logs: tuple[Path, ...], as_json: bool) -> None:
    """Every compile-cache entry under ROOT (default $VLLM_CACHE_ROOT or ~/.cache/vllm).
    """
    root = root or scanmod.default_root()
    if not root.exists():
        raise InputError(f"no cache at {root}", "pass the VLLM_CACHE_ROOT the server used")
    res = scanmod.scan(root, logs)
    if as_json:
        click.echo(json.dumps(res.to_json()))
        return
    if not res.entries:
        click.echo(f"no compile-cache entries under {root}")
    for e in res.entries:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.mtime))
        click.echo(f"{e.layout:12s} {e.key[:16]}  rank {e.rank}/{e.dp_rank}  "
                   f"{e.tag or '?':12s} {e.size_bytes / 1e6:7.2f} MB  {when}")
        for u in e.uses:
            extra = f" ({u.reason})" if u.reason else ""
            click.echo(f"    {u.action}{extra} by {u.log}: {u.spec or 'spec config not logged'}")
    shared = res.shared_keys()
    for e in shared:
        click.echo(f"SHARED KEY {e.key[:16]} ({e.tag}): used by launches with different "
                   f"speculative configs: {sorted(e.specs())}")
    if res.unmatched_uses:
        err_console().print(f"{len(res.unmatched_uses)} logged cache paths are not on disk "
                            "(another root, or deleted)")


@cache.command("ab", context_settings={"ignore_unknown_options": True}, epilog=example(
    "specdoctor cache ab --port 8000 -- vllm serve MODEL --port 8000 "
    "--speculative-config '{...}'"))
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="The port COMMAND serves on.")
@click.option("--lab", "lab_method", type=click.Choice(LAB_METHODS), default=None,
              help="Instead of COMMAND: a lab server of this method (see specdoctor lab up).")
@click.option("--control", default=None, help="With --lab: a control drafter.")
@click.option("--fault", default=None, help="With --lab: a fault of the catalogue.")
@click.option("-n", "--num-prompts", type=int, default=abmod.AB_PROMPTS, show_default=True)
@click.option("--max-tokens", type=int, default=abmod.AB_MAX_TOKENS, show_default=True)
@ready_timeout_option(READY_TIMEOUT_S, hidden=("--timeout",))
@click.option("--keep", is_flag=True, help="Keep the isolated cache root afterwards.")
@json_option
def ab_(command: tuple[str, ...], port: int | None, lab_method: str | None,
        control: str | None, fault: str | None, num_prompts: int, max_tokens: int,
        ready_timeout: float, keep: bool, as_json: bool) -> None:
    """The same launch with the cache as found and with a fresh isolated cache; verdict.
    """
    spec = _spec(command, port, lab_method, control, fault)
    err = err_console()
    res = abmod.ab(spec, abmod.protocol_measure(num_prompts, max_tokens), timeout_s=ready_timeout,
                   keep_isolated=keep, on_progress=lambda m: err.print(f"cache ab: {m}"))
    if as_json:
        click.echo(json.dumps(res.to_json()))
        _refuse_no_arm(res)
        return
    click.echo(f"verdict: {res.verdict}")
    for line in res.evidence:
        click.echo(f"  {line}")
    for arm in (res.found, res.isolated):
        if arm.error:
            click.echo(f"{arm.name} failed; last log lines:\n{arm.log_tail}")
    _refuse_no_arm(res)


def _refuse_no_arm(res: Any) -> None:
    """Neither arm served: no comparison was made, which is no answer (exit 3)."""
    if res.found.error and res.isolated.error:
        raise TargetError(f"neither launch served ({res.found.name}: {res.found.error}; "
                          f"{res.isolated.name}: {res.isolated.error})"[:600],
                          "check the launch command and its log lines above")


def _spec(command: tuple[str, ...], port: int | None, lab_method: str | None,
          control: str | None, fault: str | None):
    from specdoctor.launch import free_port, parse_command

    if lab_method:
        from specdoctor.lab import lab as labmod

        return labmod.lab_spec(lab_method, None, port or free_port(), control=control,
                               fault=fault)
    if not command:
        raise InputError("no launch to run", "write the server command after --, or --lab METHOD")
    if shutil.which(command[0]) is None:
        raise InputError(f"no command {command[0]!r}: not on PATH, nor an executable file",
                         "write the server command after --, e.g. -- vllm serve MODEL --port 8000")
    spec = parse_command(command, port=port, any_server=True, label="cache-ab")
    if port is None and spec.engine == "unknown" and spec.arg("--port") is None:
        raise InputError("cannot tell which port the server listens on", "pass --port N")
    return spec
