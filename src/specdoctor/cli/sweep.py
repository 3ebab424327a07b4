"""`specdoctor sweep`: one server command, many configurations — k, method, drafter — each
launched, benchmarked over the same matrix and stopped, against the same server with speculation
off. Repeats interleave configurations (A B A B …). Ends with the winner of each workload, the
configurations it does not significantly beat, and its exact launch command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from specdoctor.bench import runner
from specdoctor.cli.bench import lab_base, matrix_options, params_from, resume, run_plan, split_devices
from specdoctor.cli.options import env_option, example, list_option, parse_env
from specdoctor.errors import InputError
from specdoctor.lab.lab import METHODS as LAB_METHODS
from specdoctor.methods import SPECULATIVE_METHODS


@click.command(epilog=example(
    "specdoctor sweep --lab --method ngram,draft_model --k 2,4 --repeat 2"))
@click.option("--launch", "launch_cmd", default=None, metavar="COMMAND",
              help="The server command as you run it (vllm serve …, python -m "
                   "vllm.entrypoints.openai.api_server …, python -m sglang.launch_server …).")
@env_option("Environment for --launch.")
@click.option("--lab", is_flag=True, help="Sweep the lab (real vLLM on tiny models).")
@list_option("--k", "ks", kind=int,
             help="Values of k (draft tokens per step), e.g. --k 1,2,4. Default: the command's "
                  "own k (lab: 2,4).")
@list_option("--method", "methods", choices=SPECULATIVE_METHODS,
             help="Speculative methods, e.g. --method ngram,draft_model. Default: the command's "
                  "own (lab: draft_model).")
@list_option("--drafter", "drafters",
             help="Drafter models (paths or hub ids) for draft-model methods.")
@click.option("--flag", "flags", multiple=True, metavar="NAME=V1,V2",
              help="Also sweep a server flag's values, e.g. --flag spec-draft-p-min=0,0.75 "
                   "(llama-server's --spec-draft-p-min) or --flag max-num-seqs=8,32: every "
                   "configuration is run with each value (several --flag: every combination).")
@click.option("--no-baseline", is_flag=True, help="Skip the speculation-off baseline.")
@click.option("--devices", multiple=True, metavar="IDS",
              help="Device sets, one per concurrent launch: --devices '0,1 2,3' runs two "
                   "configurations at once with CUDA_VISIBLE_DEVICES=0,1 and =2,3.")
@matrix_options
def sweep(launch_cmd: str | None, env_kv: tuple[str, ...], lab: bool, ks: tuple[int, ...],
          methods: tuple[str, ...], drafters: tuple[str, ...], flags: tuple[str, ...],
          no_baseline: bool, devices: tuple[str, ...], **o: Any) -> None:
    """Benchmark every configuration of the sweep (and the spec-off baseline) over one matrix,
    in one session, with one ruler; say which configuration wins each workload, and by how much.
    """
    if o["resume_id"] is not None:
        return resume("sweep", o)
    if (launch_cmd is None) == (not lab):
        raise InputError("say what to sweep: exactly one of --launch 'COMMAND' or --lab",
                         "e.g. specdoctor sweep --lab --method ngram,draft_model --k 2,4")
    p = params_from(o)
    configs = plan_configs(launch_cmd, parse_env(env_kv), lab, ks, methods, drafters,
                           not no_baseline, p.endpoint, parse_flags(flags))
    plan = runner.Plan("sweep", p, configs, o["repeat"], split_devices(devices), o["ready_timeout"])
    return run_plan(plan, o)


def parse_flags(given: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """``--flag NAME=V1,V2`` values as (name, values); bad input naming the one malformed."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for g in given:
        bare, eq, values = g.partition("=")
        name = bare if bare.startswith("-") else f"--{bare}"   # the server's flag, dashes optional
        vals = tuple(v.strip() for v in values.split(",") if v.strip())
        if not eq or not bare.lstrip("-") or not vals or any(
                not c.isprintable() or c.isspace() for c in name):
            raise InputError(f"--flag {g!r} is not NAME=V1,V2",
                             "e.g. --flag spec-draft-p-min=0,0.75")
        if name in (n for n, _ in out):
            raise InputError(f"--flag {name} is given twice", "give its values once: NAME=V1,V2")
        out.append((name, vals))
    return out


def with_flags(specs: list[Any], flags: list[tuple[str, tuple[str, ...]]]) -> list[Any]:
    """Every (method, k, spec) once per combination of the swept flags' values, each label
    saying its values (pure)."""
    from dataclasses import replace

    from specdoctor.launch import argv as A

    for name, values in flags:
        specs = [(m, k, replace(s, argv=A.put(s.argv, name, v)).with_label(
                    f"{s.label}:{name.lstrip('-')}={v}"))
                 for m, k, s in specs for v in values]
    return specs


def plan_configs(launch_cmd: str | None, env: dict[str, str], lab: bool, ks: tuple[int, ...],
                 methods: tuple[str, ...], drafters: tuple[str, ...], baseline: bool,
                 endpoint: str, flags: list[tuple[str, tuple[str, ...]]] | None = None
                 ) -> list[runner.Config]:
    """The baseline first, then method × drafter × k (× each swept flag's values), each one
    edit away from the base command."""
    if any(not 1 <= k <= 64 for k in ks):
        raise InputError("every --k must be from 1 to 64", "e.g. --k 1,2,4")
    configs: list[runner.Config] = []
    if lab:
        if drafters:
            raise InputError("--drafter does not apply to --lab",
                             "the lab's draft_model drafts with a copy of the target")
        other = [m for m in methods if m not in LAB_METHODS]
        if other:
            raise InputError(f"the lab serves no {', '.join(other)}",
                             f"sweep the lab's methods: {', '.join(LAB_METHODS)}")
        ms, kk = methods or ("draft_model",), ks or (2, 4)
        specs = [(m, k, lab_base(m, k, endpoint)) for m in ms for k in kk]
        base = specs[0][2]
    else:
        from specdoctor.launch import parse_command

        base = parse_command(launch_cmd or "", env)
        cur = base.speculation
        ms = methods or ((cur.method,) if cur and cur.method else ())
        if not ms:
            raise InputError("the command has speculation off and no --method was given",
                             "pass --method, e.g. --method ngram --k 2,4")
        kk = ks or ((cur.k,) if cur and cur.k else ())
        if not kk:
            raise InputError("no k: the command sets none and no --k was given", "pass --k 2,4")
        specs = []
        for m in ms:
            for d in drafters or (None,):
                for k in kk:
                    s = base.with_speculative(method=m, k=k, drafter=d)
                    label = f"{m}:k={k}" + (f":{Path(d).name}" if d and len(drafters) > 1 else "")
                    specs.append((m, k, s.with_label(label)))
    specs = with_flags(specs, flags or [])
    if baseline:
        off = base.without_speculation()
        configs.append(runner.Config(off.label, "baseline", spec=off))
    seen = set()
    for _, _, s in specs:
        if s.label in seen:
            raise InputError(f"two configurations are both {s.label}", "remove the duplicate value")
        seen.add(s.label)
        configs.append(runner.Config(s.label, spec=s))
    return configs
