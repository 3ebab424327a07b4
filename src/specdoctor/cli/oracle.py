"""`specdoctor oracle`: the acceptance a correct engine reaches with these weights, and the gap
to what a server measured (`--compare RUN_ID`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from specdoctor.bench.prompts import SUITES, take
from specdoctor.cli.options import record, store_options
from specdoctor.errors import InputError
from specdoctor.report.console import err_console
from specdoctor.report.table import print_notes, profile_table


def parse_sampling(text: str) -> tuple[float, float]:
    """``greedy`` → (0, 1); ``T`` or ``T,top_p`` → floats."""
    if text.strip().lower() == "greedy":
        return 0.0, 1.0
    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2):
        raise InputError(f"--sampling {text!r} is neither 'greedy' nor 'T,top_p'",
                         "e.g. --sampling greedy or --sampling 1.0,0.95")
    return parts[0], parts[1] if len(parts) == 2 else 1.0


@click.command()
@click.option("--target", type=click.Path(path_type=Path, exists=True, file_okay=False),
              default=None, help="Target model directory (Hugging Face format).")
@click.option("--draft", type=click.Path(path_type=Path, exists=True, file_okay=False),
              default=None, help="Draft model directory (method draft_model).")
@click.option("--method", type=click.Choice(["draft_model", "ngram"]), default=None,
              help="draft_model (with --draft) or ngram (prompt lookup). Default: from --draft.")
@click.option("--k", type=int, default=None, help="Draft tokens per step. [default: 4]")
@click.option("--suite", type=click.Choice(sorted(SUITES)), default="code", show_default=True)
@click.option("--num-prompts", "-n", type=int, default=16, show_default=True)
@click.option("--max-tokens", type=int, default=None, help="Tokens per request. [default: 64]")
@click.option("--sampling", default=None,
              help="'greedy' or 'T,top_p' (e.g. 1.0,0.95), applied as the engine applies them. "
                   "[default: greedy]")
@click.option("--draft-sampling", type=click.Choice(["argmax", "probabilistic"]), default=None,
              help="How the engine drafts when sampling: argmax (vLLM's default "
                   "draft_sample_method='greedy') or probabilistic. [default: argmax]")
@click.option("--samples", type=int, default=1, show_default=True,
              help="Sampled trajectories per prompt (sampling only).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--prompt-lookup-min", type=int, default=None, help="ngram: min n. [default: 2]")
@click.option("--prompt-lookup-max", type=int, default=None, help="ngram: max n. [default: 4]")
@click.option("--max-model-len", type=int, default=None,
              help="The server's --max-model-len (caps ngram drafts near the end).")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda, cuda:N.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32",
              show_default=True)
@click.option("--threads", type=int, default=None,
              help="CPU threads (default: 1 for small models, where more only add overhead).")
@click.option("--vocab-map", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              default=None, help='JSON {"draft_to_target": [...]} when the vocabularies differ.')
@click.option("--near-ties", "near_ties", is_flag=True,
              help="Also count, along the oracle's trajectories, the positions where bf16 picks "
                   "another argmax than fp32 (target and drafter): what a bf16 engine may flip.")
@click.option("--compare", "compare_run", type=int, default=None, metavar="RUN_ID",
              help="Compare with a recorded `measure` run; settings default to that run's.")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def oracle(target: Path | None, draft: Path | None, method: str | None, k: int | None,
           suite: str, num_prompts: int, max_tokens: int | None, sampling: str | None,
           draft_sampling: str | None, samples: int, seed: int, prompt_lookup_min: int | None,
           prompt_lookup_max: int | None, max_model_len: int | None, device: str, dtype: str,
           threads: int | None, vocab_map: Path | None, near_ties: bool,
           compare_run: int | None,
           db: Path | None, no_store: bool, as_json: bool) -> None:
    """Compute, outside the engine, the acceptance a correct engine must reach with these exact
    weights on the prompts `measure` uses: greedy (drafts vs the target's argmax), sampling
    (standard speculative sampling, argmax or sampled drafts) or prompt lookup. Prints an
    acceptance profile labelled `oracle` with 95% intervals over prompts; with --compare, the
    per-position gap to a measured run and whether it is significant."""
    from specdoctor.oracle import compare as cmp
    from specdoctor.oracle.runner import OracleConfig, estimate_seconds, run_oracle
    from specdoctor.oracle.simulate import Sampling

    measured = cmp.load_measured(db, compare_run) if compare_run is not None else None
    srv: dict[str, Any] = measured.server_settings() if measured else {}
    mparams: dict[str, Any] = measured.params if measured else {}

    target = target or (Path(srv["target"]) if srv.get("target") else None)
    if target is None:
        raise InputError("no target model", "pass --target DIR (the server's --model directory)")
    if draft is None and srv.get("draft") and (method or srv.get("method")) == "draft_model":
        draft = Path(srv["draft"])
    method = method or srv.get("method") or ("draft_model" if draft else None)
    if method is None:
        raise InputError("no drafter", "pass --draft DIR, or --method ngram")
    if measured is not None and sampling is None:
        temperature = float(mparams.get("temperature", 0.0))
        top_p = float(mparams.get("top_p", 1.0))
    else:
        temperature, top_p = parse_sampling(sampling or "greedy")
    engine_draft = {"greedy": "argmax"}.get(str(srv.get("draft_sample_method")),
                                            srv.get("draft_sample_method"))
    prompts = tuple(measured.prompts) if measured else tuple(take(suite, num_prompts))
    config = OracleConfig(
        target=target, prompts=prompts, method=method, draft=draft,
        k=k or int(srv.get("k") or 4),
        max_tokens=max_tokens or int(mparams.get("max_tokens") or 64),
        sampling=Sampling(temperature, top_p, draft_sampling or engine_draft or "argmax"),
        samples=samples, seed=seed,
        prompt_lookup_min=prompt_lookup_min or int(srv.get("prompt_lookup_min") or 2),
        prompt_lookup_max=prompt_lookup_max or int(srv.get("prompt_lookup_max") or 4),
        max_model_len=max_model_len or int(srv.get("max_model_len") or 0) or None,
        device=device, dtype=dtype, vocab_map=vocab_map, threads=threads,
        ignore_eos=bool(mparams.get("ignore_eos", True)),
    )
    console = err_console()
    console.print(f"oracle: {len(prompts)} prompts x {config.max_tokens} tokens, "
                  f"{config.sampling.label()}, at most about {estimate_seconds(config):.0f} s "
                  f"of compute after loading")
    with console.status("oracle") as status:
        result = run_oracle(config, on_request=lambda i, n: status.update(f"oracle {i}/{n}"))
    out: dict[str, Any] = result.to_json()
    if engine_draft and not config.sampling.greedy:
        out["engine_draft_sampling"] = engine_draft
    if near_ties:
        from specdoctor.oracle.numerics import near_ties as flips

        out["numerics"] = [r.to_json() for r in flips(result)]
    comparison = None
    if measured is not None:
        mu = measured.units
        if mu.shape[0] != len(prompts):
            raise InputError("the run's requests and prompts differ in number", "measure again")
        comparison = cmp.compare_units(result.prompt_units(), mu)
        if srv.get("dtype") and srv["dtype"] not in (config.dtype, "auto"):
            comparison.notes.append(
                f"the server ran in {srv['dtype']}, the oracle in {config.dtype}: near-ties "
                f"flip between precisions (about 1% of positions on the lab models) and greedy "
                f"trajectories part there; pass --dtype {srv['dtype']} to compare like with like")
        if (not config.sampling.greedy and mparams.get("seed") is not None
                and not mparams.get("seed_per_request")):
            comparison.notes.append(
                f"the measured requests all carried seed {mparams['seed']}: they share one "
                f"random stream, so they are not independent units and the measured interval "
                f"is too narrow; measure again (measure now seeds each request on its own)")
        if config.sampling.greedy:
            comparison.notes.append("greedy: the oracle is deterministic; any significant gap "
                                    "is the engine's (or a near-tie flip: see docs/oracle.md)")
        out["compare"] = {"run_id": measured.run_id, **comparison.to_json()}
    run_id = record(db, no_store, kind="oracle", engine="oracle", target=str(config.target),
                    params=config.to_json(), result=out, profile=result.profile.to_json(),
                    requests=_requests(config, result))
    if run_id is not None:
        out["run_id"] = run_id
    _print(result, comparison, out, as_json)


def _requests(config: Any, result: Any) -> list[dict[str, Any]]:
    reqs = []
    for i, t in enumerate(result.traces):
        d, dt, acc, per = t.counts(config.k)
        reqs.append({"index": i, "prompt": config.prompts[t.prompt_index],
                     "completion_tokens": len(t.output_ids), "latency_s": 0.0,
                     "profile": {"drafts": d, "draft_tokens": dt, "accepted_tokens": acc,
                                 "accepted_per_position": per, "k": config.k},
                     "per_step": [[s.accepted for s in t.steps], [s.drafted for s in t.steps]]})
    return reqs


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
        print_notes(con, comparison.notes)
    for r in out.get("numerics") or []:
        con.print(f"near-ties ({r['model']}): bf16 picks another argmax than fp32 at "
                  f"{r['flips']} of {r['positions']} positions; fp32 margin < 1e-3 at "
                  f"{r['fp32_margins_below']['0.001']}")
    c = result.cost
    where = f"{c.threads} CPU thread(s)" if c.threads else c.device
    con.print(f"cost: {c.output_tokens} tokens in {c.wall_s:.1f} s ({c.tokens_per_s:.1f} tok/s, "
              f"{c.cpu_s:.1f} CPU-s, {where}); models loaded in {c.load_s:.1f} s")
    print_notes(con, result.notes)  # the run id is announced on stderr when it is recorded
