"""The DFlash target starts where the lab Llama is: the Llama rewritten as a Qwen3 (q/k RMSNorms
initialised to the Llama's own q/k scale), before its fine-tune, against the Llama itself.

    python benchmarks/qwen3_rewrite.py [--budget ci] [--sequences 64]

Both models' mean next-token loss on the same corpus sequences (the fine-tune's own length,
starts drawn with a fixed seed), and the fine-tuned Qwen3 target's recorded training time when
it is built. Writes benchmarks/results/qwen3_rewrite.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def mean_loss(model, batch) -> float:  # noqa: ANN001
    import torch

    model.eval()
    with torch.no_grad():
        return float(model(input_ids=batch, labels=batch).loss)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", default="ci", choices=("ci", "full"))
    ap.add_argument("--sequences", type=int, default=64)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import numpy as np
    import torch

    from _provenance import git_commit, load, machine, utc_now
    from specdoctor.lab import train
    from specdoctor.lab.drafters import targets

    torch.set_num_threads(1)
    llama_dir = train.trained_target(args.budget)
    seq_len = train.recipe("target", args.budget).seq_len
    data = train.corpus_tokens(llama_dir)
    starts = np.random.default_rng(3).integers(0, len(data) - seq_len, size=args.sequences)
    batch = torch.from_numpy(np.stack([data[s:s + seq_len] for s in starts]).astype(np.int64))
    t0 = time.perf_counter()
    llama = mean_loss(targets.load_hf(llama_dir), batch)
    qwen3 = mean_loss(targets.qwen3_from_llama(llama_dir), batch)
    res = {"script": "benchmarks/qwen3_rewrite.py", "commit": git_commit(), "date": utc_now(),
           "machine": machine(), "load": load(), "budget": args.budget,
           "llama": llama_dir.name, "sequences": args.sequences, "seq_len": seq_len,
           "loss_llama": round(llama, 4), "loss_qwen3_before_finetune": round(qwen3, 4),
           "seconds": round(time.perf_counter() - t0, 1)}
    out = RESULTS / "qwen3_rewrite.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
