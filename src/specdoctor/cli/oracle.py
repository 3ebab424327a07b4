"""`specdoctor oracle`: the acceptance a correct engine reaches with these weights, and the gap
to what a server measured (`--compare RUN_ID`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from specdoctor.bench.prompts import SUITES
from specdoctor.cli.options import example, json_option, record, store_options
from specdoctor.oracle.session import Asked, default
from specdoctor.report.console import err_console
from specdoctor.report.table import print_notes, profile_table


A = Asked()  # the defaults shown here are the library's


@click.command(epilog=example(
    "specdoctor oracle --target models/target --draft models/eagle3 --method eagle3 --k 3"))
@click.option("--target", type=click.Path(path_type=Path, exists=True, file_okay=False),
              default=None, help="Target model directory (Hugging Face format).")
@click.option("--draft", type=click.Path(path_type=Path, exists=True, file_okay=False),
              default=None, help="Drafter directory (draft_model, eagle3, dflash).")
@click.option("--method", type=click.Choice(["draft_model", "ngram", "eagle3", "mtp", "dflash"]),
              default=None,
              help="draft_model, eagle3 or dflash (with --draft), mtp (the layers inside the "
                   "target's checkpoint) or ngram (prompt lookup). Default: draft_model with "
                   "--draft, or the recorded run's.")
@click.option("--k", type=int, default=None,
              help=f"Draft tokens per step. [default: {default('k')}]")
@click.option("--suite", type=click.Choice(sorted(SUITES)), default=A.suite, show_default=True)
@click.option("--num-prompts", "-n", type=int, default=A.num_prompts, show_default=True)
@click.option("--max-tokens", type=int, default=None,
              help=f"Tokens per request. [default: {default('max_tokens')}]")
@click.option("--sampling", default=None,
              help="'greedy' or 'T,top_p' (e.g. 1.0,0.95), applied as the engine applies them. "
                   "[default: greedy]")
@click.option("--draft-sampling", type=click.Choice(["argmax", "probabilistic"]), default=None,
              help="How the engine drafts when sampling: argmax (vLLM's default "
                   "draft_sample_method='greedy') or probabilistic. [default: argmax]")
@click.option("--samples", type=int, default=None,
              help=f"Sampled trajectories per prompt (sampling only). [default: "
                   f"{default('samples')}]")
@click.option("--seed", type=int, default=None, help=f"[default: {default('seed')}]")
@click.option("--prompt-lookup-min", type=int, default=None,
              help=f"ngram: min n. [default: {default('prompt_lookup_min')}]")
@click.option("--prompt-lookup-max", type=int, default=None,
              help=f"ngram: max n. [default: {default('prompt_lookup_max')}]")
@click.option("--max-model-len", type=int, default=None,
              help="The server's --max-model-len (caps ngram drafts near the end).")
@click.option("--device", default=None,
              help=f"auto, cpu, cuda, cuda:N. [default: {default('device')}]")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default=None,
              help=f"[default: {default('dtype')}]")
@click.option("--tokenizer", type=click.Path(path_type=Path, exists=True, file_okay=False),
              default=None, help="The server's --tokenizer, when it is not the target's "
                                 "(default: the recorded run's, else the target's).")
@click.option("--batch", type=int, default=None,
              help=f"eagle3/mtp/dflash, greedy: prompts of equal length decoded together "
                   f"(on a GPU). [default: {default('batch')}]")
@click.option("--threads", type=int, default=None,
              help="CPU threads (default: 1 for small models, where more only add overhead).")
@click.option("--vocab-map", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              default=None, help='JSON {"draft_to_target": [...]} when the vocabularies differ.')
@click.option("--draft-p-min", type=float, default=None,
              help="llama.cpp's --spec-draft-p-min (draft model, greedy drafting): drafting "
                   "stops before a token whose probability among the drafter's top 10 is "
                   "under it. [default: 0, every step drafts k]")
@click.option("--draft-n-min", type=int, default=None,
              help="llama.cpp's --spec-draft-n-min: a shorter draft is dropped and the step "
                   "is an ordinary decode. [default: 0]")
@click.option("--near-ties", "near_ties", is_flag=True,
              help="Also count, along the oracle's trajectories, the positions where bf16 picks "
                   "another argmax than fp32 (target and drafter): what a bf16 engine may flip.")
@click.option("--compare", "compare_run", type=int, default=None, metavar="RUN_ID",
              help="Compare with a recorded `measure` run; settings default to that run's.")
@store_options
@json_option
def oracle(target: Path | None, draft: Path | None, method: str | None, k: int | None,
           suite: str, num_prompts: int, max_tokens: int | None, sampling: str | None,
           draft_sampling: str | None, samples: int | None, seed: int | None,
           prompt_lookup_min: int | None, prompt_lookup_max: int | None,
           max_model_len: int | None, device: str | None, dtype: str | None,
           tokenizer: Path | None, batch: int | None, threads: int | None,
           vocab_map: Path | None, draft_p_min: float | None, draft_n_min: int | None,
           near_ties: bool, compare_run: int | None,
           db: Path | None, no_store: bool, as_json: bool) -> None:
    """Compute, outside the engine, the acceptance a correct engine must reach with these exact
    weights on the prompts `measure` uses: greedy (drafts vs the target's argmax), sampling
    (standard speculative sampling, argmax or sampled drafts) or prompt lookup; for a draft
    model, EAGLE3, MTP and DFlash drafters. Prints an acceptance profile labelled `oracle` with
    95% intervals over prompts; with --compare, the per-position gap to a measured run and
    whether it is significant.
    """
    from specdoctor.oracle import session
    from specdoctor.oracle.runner import estimate_seconds

    asked = session.Asked(
        target=target, draft=draft, method=method, k=k, suite=suite, num_prompts=num_prompts,
        max_tokens=max_tokens, sampling=sampling, draft_sampling=draft_sampling,
        samples=samples, seed=seed, prompt_lookup_min=prompt_lookup_min,
        prompt_lookup_max=prompt_lookup_max, max_model_len=max_model_len, device=device,
        dtype=dtype, threads=threads, vocab_map=vocab_map, tokenizer=tokenizer, batch=batch,
        draft_p_min=draft_p_min, draft_n_min=draft_n_min)
    measured, prompts = None, ()
    if compare_run is not None:
        from specdoctor.bench.measure import load_run
        from specdoctor.oracle.compare import measured_run

        stored = load_run(db, compare_run)
        measured = measured_run(stored.run_id, stored.params, stored.prompts, stored.rows,
                                stored.launch_spec)
    else:
        from specdoctor.bench.prompts import take

        prompts = tuple(take(suite, num_prompts))
    console = err_console()
    with console.status("oracle") as status:
        def start(c: Any) -> None:
            console.print(f"oracle: {len(c.prompts)} prompts x {c.max_tokens} tokens, "
                          f"{c.sampling.label()}, at most about {estimate_seconds(c):.0f} s "
                          f"of compute after loading")

        done = session.run(asked, measured, prompts, near_ties, on_start=start,
                           on_request=lambda i, n: status.update(f"oracle {i}/{n}"))
    result, out = done.result, done.out
    run_id = record(db, no_store, kind="oracle", engine="oracle", target=str(result.config.target),
                    params=result.config.to_json(), result=out,
                    profile=result.profile.to_json(),
                    requests=session.stored_requests(result))
    if run_id is not None:
        out["run_id"] = run_id
    _print(result, done.comparison, out, as_json)


def _ci(c: Any) -> str:
    if c.value is None:
        return "—"
    if c.low is None:
        return f"{c.value:.3f}"
    return f"{c.value:.3f} [{c.low:.3f}, {c.high:.3f}]"


def _print(result: Any, comparison: Any, out: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(out))
        return
    con = Console()
    cfg = result.config
    title = (f"oracle · {cfg.method}{' ' + cfg.draft.name if cfg.draft else ''} vs "
             f"{cfg.target.name} · k={cfg.k} · {cfg.sampling.label()} · {len(cfg.prompts)} prompts")
    con.print(profile_table(result.profile, title))
    if not cfg.sampling.greedy:
        t = Table(title="expected per-position acceptance (unconditional, 95% CI over prompts)",
                  title_justify="left", header_style="bold")
        t.add_column("position")
        t.add_column("expected")
        for i, c in enumerate(result.expected):
            t.add_row(str(i), _ci(c))
        con.print(t)
        if out.get("engine_draft_sampling"):
            con.print(f"the server drafts by {out['engine_draft_sampling']}; the oracle assumed "
                      f"{cfg.sampling.draft}")
    if comparison is not None:
        t = Table(title=f"oracle vs measured run {out['compare']['run_id']} (gap = oracle - "
                        f"measured; paired bootstrap over {comparison.prompts} prompts)",
                  title_justify="left", header_style="bold")
        for col in ("position", "oracle", "measured", "gap", "significant"):
            t.add_column(col)
        for r in [*comparison.positions, comparison.accepted_per_draft]:
            name = "accepted/draft" if r.position < 0 else str(r.position)
            t.add_row(name, _ci(r.oracle), _ci(r.measured), _ci(r.gap),
                      "yes" if r.significant else "no")
        con.print(t)
        con.print(f"verdict: {comparison.verdict}")
        print_notes(err_console(), comparison.notes)
    for r in out.get("numerics") or []:
        con.print(f"near-ties ({r['model']}): bf16 picks another argmax than fp32 at "
                  f"{r['flips']} of {r['positions']} positions; fp32 margin < 1e-3 at "
                  f"{r['fp32_margins_below']['0.001']}")
    c = result.cost
    where = f"{c.threads} CPU thread(s)" if c.threads else c.device
    con.print(f"cost: {c.output_tokens} tokens in {c.wall_s:.1f} s ({c.tokens_per_s:.1f} tok/s, "
              f"{c.cpu_s:.1f} CPU-s, {where}); models loaded in {c.load_s:.1f} s")
    print_notes(err_console(), result.notes)  # on stderr, as the run id it is recorded as
