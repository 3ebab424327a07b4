"""speculation-off: the launch asks for speculative decoding, and the server drafts nothing.

A server can take a drafter and never use it, and say nothing: llama-server given ``-md``
without a draft type in ``--spec-type``, or a minimum draft length above the maximum; vLLM with
``disable_by_batch_size`` at or below the batch. The signature is "nothing drafted"; which of
the launch's speculative settings keeps the server from drafting is found by relaunching it
with one setting changed at a time (``variants``) and measuring whether it drafts:

- a setting the launch gives is dropped, so the engine's own default applies (each
  ``--spec-*``/``--draft-*`` flag of llama-server but the drafter, k and where it runs; each key
  of vLLM's speculative config but the method, the drafter and k);
- a speculation type the engine needs and the launch lacks is added (llama-server: a draft
  model is used only under a ``draft-*`` entry of ``--spec-type``).

The first change under which the server drafts confirms the cause (a counterfactual), sized as
the accepted draft tokens per step it then reaches from none. None does: inconclusive, with
what was tried; a drafter the server refuses at start-up for its vocabulary is the
vocabulary check's to decide (``tokenizer-mismatch``). Its error lines about speculation, if
the server logged any, are quoted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from specdoctor.errors import SpecdoctorError
from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.experiments.logs_scan import error_lines
from specdoctor.launch import LaunchSpec, free_port
from specdoctor.launch import argv as A
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.verdict.sizing import Size

HID = "speculation-off"
MAX_VARIANTS = 6     # relaunches at most (each one server start)
PROMPTS = 4          # each relaunch measures this many of the diagnosis's prompts, greedy
# llama-server flags that say what to draft with, how deep, and where it runs: not the settings
# that decide whether it drafts, so never dropped
LLAMA_KEPT = ("--spec-draft-model", "--spec-draft-n-max", "--spec-type",
              "--spec-draft-threads", "--spec-draft-threads-batch", "--spec-draft-ngl",
              "--spec-draft-device", "--spec-draft-hf")
LLAMA_DRAFTER = ("-md", "--model-draft", "--spec-draft-model")
VLLM_KEPT = ("method", "model", "num_speculative_tokens")


@dataclass(frozen=True)
class Variant:
    change: str          # what was changed, as a user would say it
    launch: LaunchSpec


def variants(launch: LaunchSpec) -> list[Variant]:
    """The launch with one speculative setting changed at a time (pure; engine by engine)."""
    if launch.engine == "llamacpp":
        return _llama_variants(launch)
    if launch.engine == "vllm":
        return _vllm_variants(launch)
    return []


def _llama_variants(launch: LaunchSpec) -> list[Variant]:
    argv = launch.argv
    out: list[Variant] = []
    types = (A.get(argv, "--spec-type") or "").split(",")
    if A.has(argv, *LLAMA_DRAFTER) and not any(t.strip().startswith("draft-") for t in types):
        given = A.get(argv, "--spec-type")
        new = f"{given},draft-simple" if given else "draft-simple"
        out.append(Variant(f"--spec-type {new} (the drafter is used only under a draft type; "
                           f"the launch gives {'--spec-type ' + given if given else 'none'})",
                           replace(launch, argv=A.put(argv, "--spec-type", new))))
    for flag in _flags(argv):
        if flag in LLAMA_KEPT or flag in LLAMA_DRAFTER:
            continue
        if flag.startswith(("--spec-", "--draft-")):
            out.append(Variant(f"without {flag} {A.get(argv, flag)} (the server's default)",
                               replace(launch, argv=A.drop(argv, flag))))
    return out


def _vllm_variants(launch: LaunchSpec) -> list[Variant]:
    spec = launch.speculation
    if spec is None:
        return []
    raw = A.get(launch.argv, "--speculative-config")
    try:
        cfg = json.loads(raw) if raw else {}
    except ValueError:
        return []
    out: list[Variant] = []
    for key in sorted(k for k in cfg if k not in VLLM_KEPT):
        rest = {k: v for k, v in cfg.items() if k != key}
        out.append(Variant(f"without {key}={json.dumps(cfg[key])} in the speculative config",
                           replace(launch, argv=A.put(launch.argv, "--speculative-config",
                                                      json.dumps(rest)))))
    return out


def _flags(argv: tuple[str, ...]) -> list[str]:
    return [a for a in argv if a.startswith("--")]


def _drafted(m: object) -> int:
    total = getattr(m, "total", None)
    return int(total.draft_tokens or 0) if total is not None else 0


class Experiment:
    id = "spec-settings-ab"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.launch is None or ctx.launcher is None:
            return "needs a launch command to relaunch with one setting changed"
        g = ctx.measured.greedy
        if g is None or g.total is None:
            return "no greedy measurement"
        if _drafted(g):
            return "the server drafts"
        if not variants(ctx.launch):
            return "the launch gives no speculative setting to change"
        return None

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        assert ctx.launch is not None and ctx.launcher is not None
        said = [ln for ln in error_lines(ctx.server_logs.get("baseline", ""))
                if "specul" in ln.lower() or "draft" in ln.lower()][:2]
        logged = f"; the server logged: {' | '.join(said)}" if said else ""
        tried: list[str] = []
        commands: list[str] = []
        prompts = ctx.prompts[:PROMPTS]
        p = replace(common.params(ctx), num_prompts=len(prompts))
        for i, v in enumerate(variants(ctx.launch)[:MAX_VARIANTS]):
            launch = v.launch.with_port(free_port())
            commands.append(launch.shell_command())
            ctx.progress(f"speculation off? relaunch {v.change.split(' (')[0]}")
            try:
                server = ctx.launcher.start(launch, ctx.workdir / f"server-spec-settings-{i}.log")
            except SpecdoctorError as exc:
                tried.append(f"{v.change}: did not start ({str(exc)[:120]})")
                continue
            try:
                m = common.proto.run(server.url, list(prompts), p)
            except SpecdoctorError as exc:
                tried.append(f"{v.change}: not measured ({str(exc)[:120]})")
                continue
            finally:
                ctx.launcher.stop(server)
            n = _drafted(m)
            if n:
                apd = common.apd(m.total)
                iv = m.total.intervals.get("accepted_per_draft")
                size = Size(apd, iv.low if iv else None, iv.high if iv else None,
                            how=f"relaunched {v.change.split(' (')[0]}: from nothing drafted "
                                f"to {apd:.3f} accepted per draft")
                return ExperimentResult(self.id, [Finding(
                    HID, Verdict.CONFIRMED,
                    f"as launched the server drafted nothing; relaunched {v.change} it drafts "
                    f"({n} draft tokens on {len(prompts)} prompts, {apd:.3f} accepted per "
                    f"draft){logged}", basis="counterfactual", size=size)],
                    numbers={"change": v.change, "draft_tokens": n, "accepted_per_draft": apd,
                             "tried": tried}, commands=commands)
            tried.append(f"{v.change}: still nothing drafted")
        return ExperimentResult(self.id, [Finding(
            HID, Verdict.INCONCLUSIVE,
            f"as launched the server drafted nothing, and no single change of its speculative "
            f"settings made it draft ({'; '.join(tried) or 'nothing tried'}){logged}")],
            numbers={"tried": tried}, commands=commands)
