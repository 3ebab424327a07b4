"""`specdoctor audit parallel|models|launch`: draft-vs-target configuration, without a server.

    specdoctor audit parallel --model TARGET_DIR
    specdoctor audit models TARGET_DIR DRAFT_DIR --method dflash
    specdoctor audit launch --k 4 --max-cudagraph 4 --log server.log
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from specdoctor.cli.options import example, json_option, list_option
from specdoctor.errors import InputError
from specdoctor.methods import SPECULATIVE_METHODS
from specdoctor.experiments.config_audit import lints as lintmod
from specdoctor.experiments.config_audit import models as modelmod
from specdoctor.report.console import err_console
from specdoctor.served_files import read_config
from specdoctor.textfile import read_text

_DIR = click.Path(exists=True, file_okay=False, path_type=Path)


@click.group(epilog=example(
    "specdoctor audit models target/ drafter/ --method dflash"))
def audit() -> None:
    """Draft-vs-target configuration audits (no server needed).
    """


@audit.command(epilog=example(
    "specdoctor audit parallel --model target/ --json"))
@click.option("--model", "model_dir", type=_DIR, default=None,
              help="The target's model directory: needed to run each method's own proposer "
                   "code (vLLM validates the layout against the model).")
@json_option
def parallel(model_dir: Path | None, as_json: bool) -> None:
    """Fields of ParallelConfig the draft does not inherit, per target layout and method.
    """
    from specdoctor.experiments.config_audit import parallel as par

    _need_vllm()
    err = err_console()
    res = par.audit_parallel(model_dir, on_progress=lambda m: err.print(f"audit: {m}"))
    if as_json:
        click.echo(json.dumps(res.to_json()))
        return
    click.echo(f"vLLM {res.vllm_version}: {len(res.fields)} ParallelConfig fields compared")
    for note in res.notes:
        click.echo(f"note: {note}")
    for v in res.variations:
        click.echo(f"\ntarget {v.name} {v.target_args}")
        if v.error:
            click.echo(f"  {v.error.splitlines()[0]}")
        for d in v.dropped_by_create:
            click.echo(f"  create_draft_parallel_config drops {d.field}: target {d.target}, "
                       f"draft {d.draft}")
        for m in v.methods:
            if m.error:
                click.echo(f"  {m.method}: {m.error}")
                continue
            state = "runs with the target's own object (inherits every field)" if (
                m.shares_target) else (
                f"loses {len(m.lost)}" if m.lost else "inherits every field")
            extra = f"; restores {', '.join(m.restored)}" if m.restored else ""
            click.echo(f"  {m.method}: {state}{extra}")
            for d in m.lost:
                click.echo(f"    {d.field}: target {d.target}, draft {d.draft}")


@audit.command(epilog=example(
    "specdoctor audit models target/ drafter/ --method eagle3"))
@click.argument("target_dir", type=_DIR)
@click.argument("draft_dir", type=_DIR)
@click.option("--method", type=click.Choice(modelmod.METHODS), default=modelmod.DEFAULT_METHOD,
              show_default=True)
@json_option
def models(target_dir: Path, draft_dir: Path, method: str, as_json: bool) -> None:
    """Compare a drafter with its target by what METHOD needs (suspects, not verdicts).
    """
    res = modelmod.audit_models(target_dir, draft_dir, method)
    if as_json:
        click.echo(json.dumps(res.to_json(), default=str))
        return
    for f in res.findings:
        vals = "" if f.target is None and f.draft is None else (
            f"  (target {f.target}, draft {f.draft})")
        click.echo(f"{f.level:8s} {f.check}: {f.detail}{vals}")
    click.echo(f"worst: {res.worst()}")


@audit.command(epilog=example(
    "specdoctor audit launch --k 4 --method mtp --max-cudagraph 4 --log server.log"))
@click.option("--k", type=click.IntRange(1, 64), required=True, help="num_speculative_tokens.")
@click.option("--method", type=click.Choice(SPECULATIVE_METHODS), default=lintmod.BLOCK_METHOD,
              show_default=True, help="The launch's speculative method.")
@list_option("--cudagraph-sizes", kind=int, metavar="N,N,…",
             help="cudagraph_capture_sizes of the launch.")
@click.option("--max-cudagraph", type=int, default=None, help="max_cudagraph_capture_size.")
@click.option("--max-num-seqs", type=int, default=None)
@click.option("--block-size", type=int, default=None,
              help="The drafter's trained block size (default: read from --draft).")
@click.option("--draft", "draft_dir", type=_DIR, default=None,
              help="Drafter directory (its config's block_size).")
@click.option("--log", "log_path", type=click.Path(path_type=Path), default=None,
              help="A start-up log to scan for feature-disabling warnings.")
@json_option
def launch(k: int, method: str, cudagraph_sizes: tuple[int, ...], max_cudagraph: int | None,
           max_num_seqs: int | None, block_size: int | None, draft_dir: Path | None,
           log_path: Path | None, as_json: bool) -> None:
    """Launch lints: cudagraph sizes vs k+1, k vs the trained block, start-up warnings.
    """
    sizes = list(cudagraph_sizes) or None
    if block_size is None and draft_dir is not None:
        block_size = read_config(draft_dir).get("block_size")
    found = lintmod.lint_cudagraph(k, sizes, max_cudagraph, max_num_seqs)
    found += lintmod.lint_block_size(k, block_size, method)
    if log_path is not None:
        found += lintmod.lint_log(read_text(log_path, "start-up log"))
    if as_json:
        click.echo(json.dumps({"lints": [x.to_json() for x in found]}))
        return
    if not found:
        click.echo("no launch lint")
    for x in found:
        click.echo(f"{x.level:8s} {x.check}: {x.detail}")
        if x.evidence:
            click.echo(f"         {x.evidence}")


def _need_vllm() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise InputError("this audit runs vLLM's own code, and vLLM is not installed",
                         "run it in the server's Python environment")
