"""`specdoctor bench`: a fair benchmark matrix — prompt set × sampling × concurrency — against
a running server (``--url``), a server specdoctor launches from the user's own command
(``--launch``), or the lab (``--lab``); ``--baseline`` adds the same server with speculation
off, so every cell reports its speedup. Each cell is recorded as it ends; ``--resume RUN_ID``
finishes what is missing. Ends with one labelled row per cell and the report (Markdown + HTML).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from specdoctor.bench import runner
from specdoctor.bench.matrix import MatrixParams, check
from specdoctor.cli.options import (
    TEMPERATURE,
    TOP_P,
    Seconds,
    db_option,
    env_option,
    example,
    json_option,
    list_option,
    out_option,
    parse_env,
    ready_timeout_option,
)
from specdoctor.errors import InputError
from specdoctor.lab.lab import DEFAULT_K, LabRequest
from specdoctor.lab.lab import METHODS as LAB_METHODS

F = TypeVar("F", bound=Callable[..., Any])

# vLLM needs a chat template to serve /v1/chat/completions; the lab's tiny models have none.
LAB_CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"


M = MatrixParams()  # the defaults shown here are the matrix's own


def matrix_options(f: F) -> F:
    """The cells of the matrix and how each is run (shared by bench and sweep)."""
    opts = [
        list_option("--suite", "suites",
                    help=f"Prompt sets: essay, code, long, or a --dataset category. Default: "
                         f"{','.join(M.suites)}."),
        list_option("--sampling",
                    help=f"greedy (temperature 0) and/or official (temperature/top_p below). "
                         f"Default: {','.join(M.sampling)}."),
        list_option("--concurrency", "-c", kind=int,
                    help=f"Concurrent streams. Default: {','.join(map(str, M.concurrency))}."),
        click.option("--num-prompts", "-n", type=int, default=M.num_prompts, show_default=True,
                     help="Requests per cell (after one warm-up request)."),
        click.option("--max-tokens", type=int, default=M.max_tokens, show_default=True),
        click.option("--endpoint", type=click.Choice(["completions", "chat"]), default=M.endpoint,
                     show_default=True),
        click.option("--dataset", type=click.Path(dir_okay=False), default=None,
                     help="Spec-Bench / SPEED-Bench question file (JSONL or parquet, with "
                          "'category' and 'turns'): each category becomes a row of the matrix."),
        click.option("--temperature", type=TEMPERATURE, default=M.official_temperature,
                     show_default=True, help="Temperature of the 'official' sampling."),
        click.option("--top-p", type=TOP_P, default=M.official_top_p, show_default=True,
                     help="top_p of the 'official' sampling."),
        click.option("--long-chars", type=click.IntRange(1, 1 << 20), default=M.long_chars,
                     show_default=True,
                     help="Prompt length (characters) of the 'long' suite: fill the context the "
                          "model allows before decoding."),
        click.option("--seed", type=int, default=M.seed, show_default=True,
                     help="Base seed: request i is sent seed + i."),
        click.option("--model", default=M.model,
                     help="Model name to request (default: the first listed)."),
        click.option("--request-timeout", type=Seconds(),
                     default=M.timeout_s, show_default=True,
                     help="Seconds before one request counts as a timeout."),
        click.option("--repeat", type=click.IntRange(1, 1000), default=1, show_default=True,
                     help="Run the matrix this many times, configurations interleaved (A B A B); "
                          "differences within the spread are reported as not significant."),
        ready_timeout_option(runner.READY_TIMEOUT_S),
        click.option("--resume", "resume_id", type=int, default=None, metavar="RUN_ID",
                     help="Finish a recorded run: only cells not recorded as ok are run."),
        out_option("Where the report goes (default: reports/bench-RUN_ID next to the store).",
                   hidden=("--report-dir",), default=None),
        click.option("--no-report", is_flag=True, help="Skip writing the report."),
        db_option,
        json_option,
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def params_from(o: dict[str, Any]) -> MatrixParams:
    p = MatrixParams(
        suites=o["suites"] or M.suites, sampling=o["sampling"] or M.sampling,
        concurrency=o["concurrency"] or M.concurrency, num_prompts=o["num_prompts"],
        max_tokens=o["max_tokens"], endpoint=o["endpoint"], official_temperature=o["temperature"],
        official_top_p=o["top_p"], seed=o["seed"], long_chars=o["long_chars"],
        dataset=str(Path(o["dataset"]).resolve()) if o["dataset"] else None, model=o["model"],
        timeout_s=o["request_timeout"])
    if o["dataset"] and not o["suites"]:
        from specdoctor.bench.matrix import dataset_categories

        p = MatrixParams(**{**p.__dict__, "suites": tuple(dataset_categories(p.dataset))})
    check(p)
    return p


def lab_base(method: str, k: int, endpoint: str):  # -> LaunchSpec
    from specdoctor.lab import lab as labmod
    from specdoctor.launch.servers import free_port
    from specdoctor.report.console import build_progress

    labmod.check_installed()
    with build_progress():
        spec = labmod.lab_spec(method, k, free_port())
    if endpoint == "chat":
        spec = spec.with_arg("--chat-template", LAB_CHAT_TEMPLATE)
    return spec.with_label(f"{method}:k={k}")


@click.command(epilog=example(
    "specdoctor bench --lab --method ngram --baseline --suite code,essay -c 1,8 --repeat 3"))
@click.option("--url", default=None, help="A running server's base URL (http://HOST:PORT).")
@click.option("--launch", "launch_cmd", default=None, metavar="COMMAND",
              help="The server command as you run it (vllm serve …, python -m "
                   "vllm.entrypoints.openai.api_server …, python -m sglang.launch_server …): "
                   "specdoctor starts it on a free port, benchmarks it and stops it.")
@env_option("Environment for --launch.")
@click.option("--lab", is_flag=True, help="Launch the lab (real vLLM on tiny models).")
@click.option("--method", type=click.Choice(LAB_METHODS), default=LabRequest.method,
              show_default=True, help="--lab: speculative method.")
@click.option("--k", type=click.IntRange(1, 64), default=DEFAULT_K, show_default=True,
              help="--lab: draft tokens per step.")
@click.option("--baseline", is_flag=True,
              help="--launch/--lab: also run the same server with speculation off; every cell "
                   "then reports its speedup.")
@click.option("--devices", multiple=True, metavar="IDS",
              help="Device sets for launches side by side, e.g. --devices '0,1 2,3' (one "
                   "CUDA_VISIBLE_DEVICES per concurrent launch).")
@matrix_options
def bench(url: str | None, launch_cmd: str | None, env_kv: tuple[str, ...], lab: bool,
          method: str, k: int, baseline: bool, devices: tuple[str, ...], **o: Any) -> None:
    """Benchmark a server over a matrix of cells: acceptance with 95% intervals, tok/s per stream
    and aggregate, TTFT/ITL/TPOT percentiles, accepted-per-step histogram, failures per cell.
    """
    if o["resume_id"] is not None:
        return resume("bench", o)
    modes = sum(x is not None and x is not False for x in (url, launch_cmd, lab or None))
    if modes != 1:
        raise InputError("say what to benchmark: exactly one of --url, --launch or --lab",
                         "e.g. specdoctor bench --url http://127.0.0.1:8000")
    p = params_from(o)
    configs: list[runner.Config] = []
    if url is not None:
        if baseline:
            raise InputError("--baseline needs a server specdoctor launches",
                             "use --launch 'COMMAND' (or --lab) to get the spec-off baseline")
        from specdoctor.errors import TargetError
        from specdoctor.launch import http_ok

        if not http_ok(url.rstrip("/") + "/v1/models", 10.0):
            raise TargetError(f"cannot reach {url} (GET /v1/models did not answer 200)",
                              "is the server up and is this its base URL (http://HOST:PORT)?")
        configs.append(runner.Config(label=url, url=url.rstrip("/")))
    else:
        if launch_cmd is not None:
            from specdoctor.launch import parse_command

            spec = parse_command(launch_cmd, parse_env(env_kv))
        else:
            spec = lab_base(method, k, p.endpoint)
        if baseline:
            off = spec.without_speculation()
            configs.append(runner.Config(label=off.label, role="baseline", spec=off))
        configs.append(runner.Config(label=spec.label, spec=spec))
    plan = runner.Plan("bench", p, configs, o["repeat"], split_devices(devices), o["ready_timeout"])
    return run_plan(plan, o)


def split_devices(values: tuple[str, ...]) -> list[str]:
    return [part for v in values for part in v.replace(";", " ").split()]


def resume(kind: str, o: dict[str, Any]) -> None:
    from specdoctor.store.bench import open_bench_store

    store = open_bench_store(o["db"])
    try:
        plan = runner.load_plan(store, o["resume_id"])
    finally:
        store.close()
    if plan.kind != kind:
        raise InputError(f"run {o['resume_id']} is a {plan.kind} run",
                         f"resume it with: specdoctor {plan.kind} --resume {o['resume_id']}")
    run_plan(plan, o, run_id=o["resume_id"])


def run_plan(plan: runner.Plan, o: dict[str, Any], run_id: int | None = None) -> None:
    from specdoctor.bench import summary
    from specdoctor.report.bench_console import ConsoleEvents, print_rows
    from specdoctor.store.bench import open_bench_store

    store = open_bench_store(o["db"])
    try:
        if run_id is None:
            run_id = runner.start_run(store, plan)
        events = ConsoleEvents(run_id, plan, quiet=o["as_json"])
        try:
            status = runner.execute(store, run_id, plan, events)
        finally:
            events.close()
        run = store.run(run_id)
        rows = summary.rows(store.cells(run_id), run.configs)
        report_paths: dict[str, str] = {}
        if not o["no_report"]:
            from specdoctor.report.bench import write_report

            out_dir = o["out_dir"] or Path(store.path).parent / "reports" / f"bench-{run_id}"
            written = write_report(run, run_id, store.cells(run_id), out_dir)
            report_paths = {k: str(v) for k, v in written.items()}
    finally:
        store.close()
    verdicts = summary.verdicts(rows)
    if o["as_json"]:
        click.echo(json.dumps({"run_id": run_id, "kind": plan.kind, "status": status,
                               "configs": [c.to_json() for c in plan.configs],
                               "rows": [r.to_json() for r in rows],
                               "verdicts": [v.to_json() for v in verdicts],
                               "report": report_paths}))
    else:
        print_rows(run_id, plan.kind, status, rows, verdicts, report_paths)
    if status != "ok":
        raise SystemExit(3)
