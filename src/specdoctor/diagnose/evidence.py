"""What a diagnosis knows before it decides anything: the context, the server it started, the
measurements, the logs, the served setup, and the facts the signature reads.

Each step fills the experiments' ``Context`` and says in the notes where a value came from or
why it is missing; none decides a verdict (``diagnose.settle`` and the verdict core do).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from specdoctor.bench.prompts import take
from specdoctor.diagnose import references
from specdoctor.diagnose.signature import Facts
from specdoctor.diagnose.target import Options, Target
from specdoctor.errors import SpecdoctorError
from specdoctor.experiments import common
from specdoctor.experiments.base import Context, Launcher, Measured
from specdoctor.experiments.logs_scan import error_lines
from specdoctor.experiments.oracle_gap import expected_profile
from specdoctor.experiments.repeat import fall as repeat_fall
from specdoctor.launch import LaunchSpec, free_port
from specdoctor.verdict.findings import ExperimentResult


def context(target: Target, opts: Options, launcher: Launcher | None,
             progress: Callable[[str], None]) -> Context:
    prompts: list[str] = []
    for s in opts.suites:
        prompts += take(s, opts.prompts_per_suite)
    ctx = Context(workdir=opts.workdir, url=target.url, launch=target.launch, launcher=launcher,
                  logs=target.logs, prompts=tuple(prompts), max_tokens=opts.max_tokens,
                  sampling=opts.sampled, progress=progress)
    if target.launch is not None:
        s = common.settings(target.launch)
        ctx.settings = s
        ctx.engine = target.launch.engine if target.launch.engine != "unknown" else None
        ctx.method, ctx.k = s.method, s.k
        ctx.target_dir, ctx.draft_dir, ctx.tokenizer_dir = s.target, s.draft, s.tokenizer
    ctx.suite = ",".join(opts.suites)
    return ctx


def user_setup(ctx: Context, opts: Options, notes: list[str]) -> None:
    """--method/--k where the target does not say (a stated value wins, with a note when the
    target said otherwise)."""
    for attr, given in (("method", opts.method), ("k", opts.k)):
        if given is None:
            continue
        found = getattr(ctx, attr)
        if found is not None and found != given:
            notes.append(f"the target says {attr} {found}; using the {given} you gave")
        setattr(ctx, attr, given)


def start(ctx: Context, launch: LaunchSpec, notes: list[str]) -> Any:
    assert ctx.launcher is not None   # diagnose() gives every launch target one
    launch = launch.with_port(free_port())
    ctx.launch = launch
    ctx.progress(f"starting the server: {launch.shell_command()[:160]}")
    try:
        server = ctx.launcher.start(launch, ctx.workdir / "server-baseline.log")
    except SpecdoctorError as exc:
        notes.append(f"the server did not start: {exc.problem}"
                     + (f" ({exc.fix})" if exc.fix else ""))
        ctx.server_logs["baseline"] = common.read_text(
            ctx.workdir / "server-baseline.log")
        ctx.errors = [exc.problem.splitlines()[0]]
        return None
    ctx.url = server.url
    ctx.baseline_server = server
    ctx.started_fresh = True
    return server


def measure(ctx: Context, opts: Options, notes: list[str]) -> None:
    runs = []
    if opts.greedy:
        # twice on the same prompts: a correct engine keeps nothing from one request to the
        # next that changes its acceptance (experiments/repeat.py)
        runs += [("greedy", "greedy", 0.0, 1.0, 1), ("greedy again", "greedy_again", 0.0, 1.0, 1)]
    if opts.sampled is not None:
        runs.append(("sampled", "sampled", opts.sampled[0], opts.sampled[1], 1))
    if opts.concurrency8:
        runs.append(("greedy c=8", "loaded", 0.0, 1.0, 8))
    for label, pass_, t, p, c in runs:
        ctx.progress(f"measuring {label} ({len(ctx.prompts)} prompts x {ctx.max_tokens} tokens)")
        try:
            if c > 1:
                loaded = common.measure_loaded(ctx, ctx.url or "", common.params(ctx, t, p, c))
                m = loaded.measurement
                if loaded.reference is not None:
                    ctx.measured.load_reference = loaded.reference
                if len(loaded.seen) > 1 or not loaded.reached:
                    notes.append(f"{label}: {loaded.words()}"
                                 + ("" if loaded.reached else ": the load was not reached, so "
                                    "this pass says nothing about load"))
            else:
                m = common.measure_url(ctx, ctx.url or "", common.params(ctx, t, p, c))
        except SpecdoctorError as exc:
            notes.append(f"{label}: {exc}")
            ctx.errors.append(str(exc))
            continue
        if ctx.baseline_server is not None:
            _drafts_from_log(m, ctx.baseline_server.log_path)
        setattr(ctx.measured, pass_, m)
        if ctx.engine is None and getattr(m, "engine", None):
            ctx.engine = m.engine   # whose counters the measurement read (vllm, llamacpp)
        if m.error:
            notes.append(f"{label}: {m.error}")
            ctx.errors.append(m.error)


LONGER = 4            # a measurement too short to tell is made this many times longer
LONGER_MAX_TOKENS = 512


def measure_longer(ctx: Context, opts: Options, notes: list[str]) -> bool:
    """Every pass measured again with ``LONGER`` times the tokens per request (at most
    ``LONGER_MAX_TOKENS``), and the oracles computed on the new passes: what a live server
    drafted too rarely to tell a broken drafter from a working one (no draft accepted, but too
    few drafts for that to say anything) is measured until it can. False where there is no live
    server or the requests cannot grow."""
    longer = min(ctx.max_tokens * LONGER, LONGER_MAX_TOKENS)
    if ctx.url is None or longer <= ctx.max_tokens:
        return False
    g = ctx.measured.greedy
    drafted = g.total.drafts if g is not None else None
    notes.append(f"{drafted} drafts and none accepted in {len(ctx.prompts)} requests of "
                 f"{ctx.max_tokens} tokens: too few to tell, so every pass was measured again "
                 f"at {longer} tokens per request")
    ctx.progress(f"too few drafts to tell: measuring again at {longer} tokens per request")
    ctx.max_tokens = longer
    ctx.measured = Measured()
    ctx.oracle_greedy = ctx.oracle_gap = ctx.oracle_pos0 = ctx.oracle_step_gap = None
    ctx.oracle_sampled = ctx.oracle_sampled_gap = None
    measure(ctx, opts, notes)
    return ctx.measured.greedy is not None


def _drafts_from_log(m: Any, log_path: Path) -> None:
    """llama-server's drafts per request from the log of the server this diagnosis started
    (``bench.measure.drafts_from_log``); the last request's line is written as the server
    releases it, so it is looked for again for up to two seconds."""
    import time

    from specdoctor.bench.measure import drafts_from_log, drafts_unknown

    if not drafts_unknown(m):
        return
    for _ in range(5):
        if drafts_from_log(m, common.read_text(log_path)):
            return
        time.sleep(0.5)


def read_logs(ctx: Context, paths: tuple[Path, ...], opts: Options, notes: list[str]) -> None:
    """The logs' evidence (diagnose.log_evidence): profile, windows, method, k, spec-off."""
    from specdoctor.diagnose.log_evidence import read_for_diagnosis

    ev = read_for_diagnosis(paths, opts.engine, method=opts.method, k=opts.k)
    notes += ev.notes
    for p in paths:
        ctx.server_logs[str(p)] = common.read_text(p)
    if ev.speculation_off:
        ctx.speculation_off = ev.speculation_off
    if ev.profile is None:
        return
    ctx.windows = tuple(ev.windows)
    ctx.log_total = ev.profile
    ctx.method = ctx.method or ev.method
    ctx.k = ctx.k if ctx.k is not None else ev.k


def served_setup(ctx: Context, target: Target, opts: Options, notes: list[str]
                  ) -> dict[str, Any]:
    """A target that cannot be restarted: the setup the oracle and the static experiments need,
    from the user's flags, the start-up log, /v1/models and what was measured
    (diagnose.served); each value's origin and what stays unknown go to the notes."""
    from specdoctor.bench.measure import served_models
    from specdoctor.diagnose import served
    from specdoctor.sources.vllm_startup import startup_config

    cards = None
    if ctx.url is not None:
        try:
            cards = served_models(ctx.url)
        except SpecdoctorError as exc:
            notes.append(f"/v1/models: {exc.problem}")
    startup = None
    for p in target.logs:
        try:
            startup = startup_config(str(p)) or startup
        except OSError as exc:
            notes.append(f"{p}: start-up lines not read ({exc})")
    greedy = ctx.measured.greedy
    setup = served.decide(
        served.Given(opts.target_dir, opts.draft_dir, opts.tokenizer_dir, opts.method, opts.k),
        cards, startup, log_method=ctx.method, log_k=ctx.k,
        measured_k=greedy.total.k if greedy is not None and greedy.total is not None else None,
        url=ctx.url or "the server")
    s = ctx.settings = setup.settings
    ctx.target_dir, ctx.draft_dir, ctx.tokenizer_dir = s.target, s.draft, s.tokenizer
    ctx.method, ctx.k = s.method, s.k
    notes += setup.notes
    if setup.origins or ctx.url is not None:
        notes.append(setup.summary())
    if setup.missing and ctx.url is not None:
        notes.append("the oracle still needs: " + "; ".join(setup.missing))
    return setup.to_json()


def gguf_models(ctx: Context, notes: list[str]) -> None:
    """A target or drafter served as a GGUF file (llama-server's -m, -md; or --target/--draft)
    is read by the oracle and the experiments as a Hugging Face directory of the same weights
    (``gguf_files.hf_dir``, dequantized); the GGUF itself is kept in ``ctx.gguf`` for what
    only its metadata tells (the vocabulary llama.cpp compares). A file that cannot be read so
    is a note, and what needs the models says it is missing them."""
    from specdoctor import gguf_files

    for role in ("target", "draft"):
        path = getattr(ctx, f"{role}_dir")
        if path is None or not Path(path).is_file() or not gguf_files.is_gguf(Path(path)):
            continue
        ctx.gguf[role] = Path(path)
        ctx.progress(f"reading the {role} GGUF {Path(path).name} as the oracle reads models")
        try:
            setattr(ctx, f"{role}_dir", gguf_files.hf_dir(Path(path)))
        except SpecdoctorError as exc:
            setattr(ctx, f"{role}_dir", None)
            notes.append(f"the {role} GGUF is not read as a model: {exc}")


def k_from_measurement(ctx: Context, notes: list[str]) -> None:
    """A command that does not say k (a default the engine fills in): the greedy measurement's
    per-position counts do."""
    greedy = ctx.measured.greedy
    if ctx.k is None and greedy is not None and greedy.total is not None and greedy.total.k:
        ctx.k = greedy.total.k
        notes.append(f"k {ctx.k}: from the greedy measurement's per-position counts")


def as_served_vocabulary(ctx: Context, notes: list[str]) -> None:
    """A drafter whose tokenizer is not the target's is run by the engine on the target's ids as
    they are; the oracle must read them the same way to reproduce what the engine does."""
    from specdoctor.experiments.vocab import as_served_map

    try:
        path = as_served_map(ctx)
    except (OSError, ValueError) as exc:
        notes.append(f"vocabulary: could not compare the tokenizers ({exc})")
        return
    if path is not None:
        ctx.oracle_vocab_map = path
        notes.append("the drafter's tokenizer gives some ids other tokens than the target's; "
                     "the oracle reads its ids the way the engine does")


def facts(ctx: Context, opts: Options, oracle_result: ExperimentResult | None) -> Facts:
    greedy = ctx.measured.greedy
    profile = greedy.total if greedy is not None else ctx.log_total
    oracle_ref = None
    if oracle_result is not None and ctx.oracle_greedy is not None:
        oracle_ref = references.reference_from_profile(
            expected_profile(ctx.oracle_greedy), "oracle (greedy, same prompts)", "oracle",
            "computed from the served weights", tolerance=0.05)
    user = references.load_user_reference(opts.reference_file) if opts.reference_file else None
    published = references.published_for(ctx.method, ctx.k, references.served_of(ctx))
    sampled = ctx.measured.sampled
    errors = list(ctx.errors)
    for text in ctx.server_logs.values():
        errors += error_lines(text, 5)
    return Facts(
        greedy=profile,
        reference=references.choose(oracle_ref, user, published),
        sampled=sampled.total if sampled is not None else None,
        sampled_gap=ctx.oracle_sampled_gap,
        sampled_label="T={:g}, top_p={:g}".format(*opts.sampled) if opts.sampled else "",
        concurrent=(ctx.measured.loaded.total
                    if ctx.measured.loaded is not None
                    and common.load_reached(ctx.measured.loaded) else None),
        repeat=repeat_fall(ctx),
        greedy_again=(ctx.measured.greedy_again.total if ctx.measured.greedy_again is not None
                      else None),
        concurrent_reference=(ctx.measured.load_reference.total
                              if ctx.measured.load_reference is not None else None),
        windows=tuple(ctx.windows),
        errors=tuple(errors),
        tok_s=greedy.output_tok_s if greedy is not None else None,
        tok_s_spec_off=ctx.tok_s_spec_off,
        method=ctx.method, k=ctx.k, speculation_off=ctx.speculation_off,
        step_gap=ctx.oracle_step_gap)


def no_reference(method: str | None, k: int | None = None,
                 served: references.Served | None = None) -> str:
    """What to give so that a symptom can be called low (pure)."""
    why = references.why_no_published(method, k, served)
    first = ("pass --method (and --k) to compare with the published figures for that drafter, "
             if method is None else
             f"{why}: pass --k to compare with the published figures at that k, "
             if k is None and why else f"{why}: " if why else "")
    return ("no reference to compare with, so nothing can be called low: " + first
            + "--reference FILE with your own, or the served model's directories (diagnose --url "
              "with --target DIR --draft DIR, or with the server's start-up log in --logs) or "
              "diagnose --launch '<the server command>' so that the oracle computes what these "
              "weights allow")


def method_reference(method: str | None, k: int | None, user_file: Path | None,
                     served: references.Served | None = None) -> references.Reference | None:
    """What the method reaches at this k, to split slower-than-spec-off by: the published
    figure and the user's reference (at this k: cut to its first k positions when it states
    more per-position rates; a mean-only one only at its own k), the higher of the two — the
    acceptance a healthy drafter of this method is known to reach. Not the oracle: it runs these
    weights, so it shares whatever made them weak."""
    if k is None:
        return None
    refs = [r for r in (references.published_for(method, k, served),) if r is not None]
    if user_file is not None:
        user = references.load_user_reference(user_file)
        if user.k == k or (user.shape_stated and user.k > k):
            refs.append(replace(user, per_position=user.per_position[:k]))
    return max(refs, key=lambda r: r.accepted_per_draft) if refs else None

