"""``replay``: where an engine-side gap is lost, drafting or verification, from the engine's
own steps.

When a measurement is off its oracle (greedy or sampled, below or above), the user's command is
relaunched once with the ``draft-trace`` pack (``packs/draft_trace``: per verify step, the
draft ids vLLM's scheduler sent and the tokens the step emitted) after the launch's own
PYTHONPATH, the off measurements are taken again on the same prompts, and every step is
re-scored by the oracle's models on the engine's own context (``oracle.engine_trace.replay``;
draft_model, ngram, eagle3, mtp, dflash). ``decide`` says which part differs from a correct
engine; where the drafts differ, the drafter's chain is run again as each transformation of
``oracle.transforms`` says (positions off, taps from another layer, a norm moved, a weight
taken from the target, ...), to see which reproduces them: the mechanism, or rope-sync where
it is a position offset.
With no measurement off its oracle, nothing is relaunched: all three are excluded by that
comparison.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from specdoctor.experiments import common
from specdoctor.experiments.base import Context
from specdoctor.verdict.findings import ExperimentResult, Finding, Verdict
from specdoctor.experiments.oracle_gap import oracle_unavailable
from specdoctor.methods import NO_DRAFT_DIR
from specdoctor.experiments.replay import decide as D
from specdoctor.oracle import transforms
from specdoctor.launch import LaunchSpec

HYPOTHESES = ("rejection-sampler", "engine-drafting", "rope-sync")


def traced_launch(launch: LaunchSpec, log: Path) -> LaunchSpec:
    """The launch with the draft trace on, after its own PYTHONPATH (a runtime patch the user
    serves with is installed first, as served)."""
    from specdoctor.oracle import engine_trace

    return launch.with_pythonpath(engine_trace.HOOK_DIR, prepend=False).with_env(
        {engine_trace.LOG_ENV: str(log)})


def off_labels(ctx: Context) -> dict[str, tuple[float, float]]:
    """The measurements off their oracle, or not shown within 5% of it (label → temperature,
    top_p): greedy and sampled alike."""
    out: dict[str, tuple[float, float]] = {}
    g, s = ctx.oracle_gap, ctx.oracle_sampled_gap
    if ctx.measured.greedy is not None and g is not None and not g.bounded:
        out["greedy"] = (0.0, 1.0)
    if ctx.measured.sampled is not None and ctx.sampling is not None and s is not None \
            and not s.bounded:
        out["sampled"] = ctx.sampling
    return out


def replay_config(ctx: Context) -> Any:
    """The oracle's reading of the served models (``oracle_gap.run_oracle``'s settings)."""
    from specdoctor.oracle.runner import OracleConfig

    s = ctx.settings
    assert s is not None and ctx.target_dir is not None
    return OracleConfig(
        target=ctx.target_dir, prompts=tuple(ctx.prompts) or ("",),
        method=ctx.method or "draft_model",
        draft=ctx.draft_dir if ctx.method not in NO_DRAFT_DIR else None,
        tokenizer=ctx.tokenizer_dir, k=ctx.k or 4, max_tokens=ctx.max_tokens,
        prompt_lookup_min=s.prompt_lookup[0], prompt_lookup_max=s.prompt_lookup[1],
        max_model_len=s.max_model_len,
        dtype=s.dtype if s.dtype in ("float32", "bfloat16", "float16") else "float32",
        vocab_map=ctx.oracle_vocab_map)


class Experiment:
    id = "replay"

    def unavailable(self, ctx: Context) -> str | None:
        if ctx.launch is None or ctx.launcher is None:
            return "needs a launch command: the replay relaunches it with the draft trace"
        if ctx.launch.engine != "vllm":
            return (f"the draft trace reads vLLM's scheduler; a {ctx.launch.engine} server is "
                    f"not traced yet")
        return oracle_unavailable(ctx)

    def run(self, ctx: Context, hypotheses: tuple[str, ...]) -> ExperimentResult:
        t0 = time.perf_counter()
        labels = off_labels(ctx)
        if not labels:
            return ExperimentResult(self.id, [
                Finding(h, Verdict.EXCLUDED, "every measurement reaches its oracle (within "
                        "5% of it, shown by its interval): the engine "
                        "drafts and verifies as a correct engine does (nothing to replay)",
                        basis="comparison") for h in hypotheses],
                wall_s=time.perf_counter() - t0)
        assert ctx.launch is not None and ctx.launcher is not None
        log = ctx.workdir / f"draft-trace-{int(time.time())}.jsonl"
        launch = traced_launch(ctx.launch, log)
        traces, problems, server_log = self._measure(ctx, launch, labels, log)
        if problems:
            why = "; ".join(problems)
            return ExperimentResult(self.id, [Finding(h, Verdict.INCONCLUSIVE, why)
                                              for h in hypotheses],
                                    commands=[launch.shell_command()], error=why,
                                    wall_s=time.perf_counter() - t0)
        ctx.progress(f"replay: re-scoring {sum(len(v) for v in traces.values())} requests "
                     f"with the oracle's models")
        replays, chains, bands, note = self._replay(ctx, traces, labels)
        loc = D.localise(replays, bands)
        loc.transforms = {label: tuple(D.transform_check(replays[label], transforms.by_id(t), ch)
                                       for t, ch in by_t.items())
                          for label, by_t in chains.items()}
        loc.transforms_note = note
        found = D.in_gap_units([f for f in D.decide(loc) if f.hypothesis in hypotheses],
                               ctx.oracle_gap)
        numbers = {"localisation": loc.to_json(),
                   "replay": {k: r.to_json() for k, r in replays.items()},
                   "trace": str(log)}
        return ExperimentResult(self.id, found, numbers, commands=[launch.shell_command()],
                                wall_s=time.perf_counter() - t0)

    @staticmethod
    def _measure(ctx: Context, launch: LaunchSpec, labels: dict[str, tuple[float, float]],
                 log: Path) -> tuple[dict[str, list[Any]], list[str], str]:
        """Relaunch once, measure each label, and split the trace by measurement."""
        from specdoctor.bench import measure as proto
        from specdoctor.errors import SpecdoctorError
        from specdoctor.launch import free_port
        from specdoctor.oracle import engine_trace

        assert ctx.launcher is not None
        launch = launch.with_port(free_port())
        server_log = ctx.workdir / f"server-replay-{int(time.time())}.log"
        ctx.progress("replay: starting the server with the draft trace")
        try:
            server = ctx.launcher.start(launch, server_log)
        except SpecdoctorError as exc:
            return {}, [f"the server did not start with the draft trace: {exc.problem}"], \
                common.read_text(server_log)
        traces: dict[str, list[Any]] = {}
        problems: list[str] = []
        seen: set[str] = set()
        try:
            for label, (t, p) in labels.items():
                ctx.progress(f"replay: measuring {label}")
                m = proto.run(server.url, list(ctx.prompts), common.params(ctx, t, p))
                if m.error:
                    problems.append(f"{label}: {m.error}")
                    continue
                try:
                    reqs = engine_trace.read(log) if log.is_file() else []
                except (RuntimeError, ValueError) as exc:
                    problems.append(f"the draft trace could not be read: {exc}")
                    break
                new = [r for r in reqs if r.req_id not in seen]
                seen.update(r.req_id for r in new)
                if not any(d for r in new for d, _ in r.rows):
                    problems.append(f"{label}: the draft trace recorded no drafts (is a plain "
                                    f"sitecustomize.py earlier on the launch's PYTHONPATH?)")
                    continue
                traces[label] = new
        except SpecdoctorError as exc:
            problems.append(str(exc))
        finally:
            ctx.launcher.stop(server)
        return traces, problems, common.read_text(server_log)

    @staticmethod
    def _replay(ctx: Context, traces: dict[str, list[Any]],
                labels: dict[str, tuple[float, float]]
                ) -> tuple[dict[str, Any], dict[str, dict[str, list[Any]]],
                           dict[str, D.NumericsBand], str]:
        """Every measurement's steps re-scored; served below fp32, the same drafter at fp32
        on the same contexts (the band precision alone gives); where its drafts differ from
        the drafter's chain beyond it, that chain again as each transformation the drafter
        runs says (``oracle.transforms``), and why not where it could not be."""
        from dataclasses import replace

        import torch

        from specdoctor.oracle import engine_trace
        from specdoctor.oracle.simulate import Sampling

        s = ctx.settings
        mode = ("argmax" if s is None or s.draft_sample_method in ("greedy", "argmax")
                else "probabilistic")
        cfg = replay_config(ctx)
        threads = torch.get_num_threads()
        note = ""
        try:
            target, drafter = engine_trace.load_replay_models(cfg)
            fp32: Any = None     # the drafter at fp32, loaded when a served chain differs
            out: dict[str, Any] = {}
            chains: dict[str, dict[str, list[Any]]] = {}
            bands: dict[str, D.NumericsBand] = {}
            tried = transforms.applicable(cfg.method)
            with torch.inference_mode():
                for label, reqs in traces.items():
                    t, p = labels[label]
                    out[label] = engine_trace.replay(reqs, target, drafter, cfg.k,
                                                     Sampling(t, p, mode))
                    if (cfg.dtype != "float32" and cfg.method != "ngram"
                            and D.drafting(out[label]).differ):
                        if fp32 is None:
                            fp32 = engine_trace.load_replay_models(
                                replace(cfg, dtype="float32"))[1]
                        ctx.progress(f"replay: {label}: the drafter at fp32 on the same "
                                     f"contexts (the band {cfg.dtype} alone gives)")
                        bands[label] = D.numerics_band(out[label], engine_trace.reference_chains(
                            reqs, out[label], fp32), cfg.dtype)
                    if not D.drafting(out[label], band=bands.get(label)).differs:
                        continue
                    ctx.progress(f"replay: {label}: searching {len(tried)} transformations of "
                                 f"the drafter for the one that reproduces its drafts")
                    chains[label] = search_transforms(
                        reqs, out[label], drafter, tried,
                        lambda text, lb=label: ctx.progress(f"replay: {lb}: {text}"))
                    idle = [t.id for t in tried if t.id not in chains[label]]
                    if idle:
                        note = (f"{cfg.method}: not run, as they change nothing for this "
                                f"drafter (a weight it already shares, a window it does not "
                                f"have, taps that would leave the target): {', '.join(idle)}")
            return out, chains, bands, note
        finally:
            torch.set_num_threads(threads)


def search_transforms(reqs: Any, replay: Any, drafter: Any, tried: Any,
                      progress: Any = None) -> dict[str, list[Any]]:
    """Every transformation in ``tried`` run on every compared step of ``replay``
    (``engine_trace.transformed_chains``), and, where one reproduces much of the differing
    steps but not enough alone, it paired with each of the others (``decide.pairs_worth``)."""
    from specdoctor.oracle import engine_trace

    chains = engine_trace.transformed_chains(reqs, replay, drafter, tried)
    pairs = D.pairs_worth([D.transform_check(replay, transforms.by_id(t), ch)
                           for t, ch in chains.items()])
    if pairs:
        if progress is not None:
            progress(f"{pairs[0].parts[0].id} reproduces much of the drafts but not enough "
                     f"alone: {len(pairs)} pairs with it")
        chains.update(engine_trace.transformed_chains(reqs, replay, drafter, pairs))
    return chains

