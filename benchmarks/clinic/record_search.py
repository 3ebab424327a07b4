"""Record the oracle's layer-set search of clinic cases, per prompt, as a test fixture.

Builds each case's served files as the clinic does (``patients``), finds its layer-id lead in
the drafter's contract as ``diagnose`` does, and runs the same search ``layer_search`` runs
(``oracle.heads.search.aux_search``: every candidate set, then the served one) on the clinic's
prompts (suite code, 8 prompts, 48 tokens). Writes the accepted drafts and drafts of every set
on every prompt, so that the search's decision is tested on real counts.

    python3 benchmarks/clinic/record_search.py up-dflash-layer-ids-shifted healthy-dflash-deep \
        > tests/experiments/fixtures/layer_search.json
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run as clinic  # noqa: E402


def record(name: str) -> dict:
    from specdoctor.bench.prompts import take
    from specdoctor.experiments import counterfactual as cf
    from specdoctor.experiments.base import Context
    from specdoctor.experiments.common import settings
    from specdoctor.launch.spec import parse_command
    from specdoctor.oracle.heads.search import aux_search
    from specdoctor.served_files import read_config

    (case,) = [c for c in clinic.CASES if c.name == name]
    tmp = Path(tempfile.mkdtemp(prefix="srv-"))
    setup = case.build(tmp)
    launch = parse_command(["python3", "-m", "vllm.entrypoints.openai.api_server",
                            *setup.argv_tail])
    s = settings(launch)
    prompts = tuple(take("code", 8))
    ctx = Context(workdir=tmp / "work", method=s.method, k=s.k, target_dir=s.target,
                  draft_dir=s.draft, tokenizer_dir=s.tokenizer, prompts=prompts, max_tokens=48,
                  settings=s)
    r = cf.review_for(ctx)
    (lead,) = [x for x in r.leads if x.search]
    d, t = read_config(s.draft), read_config(s.target)
    layers = int((t.get("text_config") or t).get("num_hidden_layers") or 0)
    options = [lead, *[lead.trying(c) for c in lead.alternatives]]
    sets = [cf.tapped(s.method, d, layers, x) for x in options]
    served = cf.tapped(s.method, d, layers) or (r.contract.aux.default if r.contract
                                                  and r.contract.aux else None)
    cands = [x for x in sets if x] + [served]
    loadable = cf.patched_copy(s.draft, options[0], tmp / "work", 0)
    res = aux_search(s.method, s.target, loadable, list(prompts), cands, s.k, 48, s.tokenizer)
    return {"case": name, "method": s.method, "k": s.k, "field": lead.field,
            "candidates": [list(c) for c in res.candidates], "served_index": len(cands) - 1,
            "accepted": res.accepted.tolist(), "drafts": res.drafts.tolist()}


def main() -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    out = {"about": "the oracle's search over target layer sets, per prompt: accepted draft "
                    "tokens and drafts of every candidate set (as vLLM taps them; the last is "
                    "the served set) on the clinic's prompts (code, 8 prompts, 48 tokens), "
                    "recorded by benchmarks/clinic/record_search.py from the clinic's case "
                    "builds",
           "commit": commit, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "cases": [record(n) for n in sys.argv[1:]]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
