"""The investigation of docs/your-server.md, section 4, run end to end as a user types it.

    python benchmarks/your_server_session.py [--port P]

One lab server (draft_model, the trained target and the small trained drafter, ``ci`` budget,
k = 4), then, through the ``specdoctor`` CLI in a fresh ``$SPECDOCTOR_HOME`` and store:
``measure`` greedy, ``logs`` on the server's log, ``oracle --compare`` on that run, ``measure``
at temperature 0.7, ``oracle --compare`` on that run, ``diagnose --url`` with the server's log
(no restart; the setup from /v1/models and the start-up log), ``diagnose --url`` without it
(what stays unknown), ``lab down``, ``diagnose --logs`` on the server's log alone, ``recon
extract`` of the installed vLLM, ``astexec`` on its ``SpeculativeConfig.compute_hash`` and
``masks diff`` from the snapshot. Tables are 100 columns wide (``COLUMNS=100``). Paths are
shortened to the variables the doc defines ($MODELS, $TARGET, $DRAFT, $SITE), the server's home to
``$SPECDOCTOR_HOME``, the interpreter to ``python3`` and its prefix to ``$PREFIX``; nothing
else is edited.

Writes benchmarks/results/your_server_session.txt (the transcript, with commit, date, machine
and load) and .json (per command: argv, exit status, seconds, output). One vLLM boot, about
ten to fifteen minutes on 2 cores. ``--render`` rewrites the .txt from the .json alone (shortening
the interpreter's paths again, if they were left in), with no server.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
N, MAX_TOKENS, TEMPERATURE = 16, 64, 0.7
ASTEXEC_STUB = ("safe_hash=lambda data, usedforsecurity=False: "
                "__import__('hashlib').sha256(data)")
ASTEXEC_CALL = ("[SpeculativeConfig.compute_hash(SimpleNamespace(method='draft_model', "
                "num_speculative_tokens=k, draft_model_config=None)) for k in (2, 4)]")
RECORDED = re.compile(r"recorded as run (\d+)")
# Paths of the machine that ran it, in the order they are replaced (longest first).
MACHINE_PATHS = [(sys.executable, "python3"), (sys.prefix, "$PREFIX")]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Session:
    """Runs ``specdoctor`` commands in one environment and keeps what each printed."""

    def __init__(self, env: dict[str, str], cwd: Path, shorten: list[tuple[str, str]]) -> None:
        self.env, self.cwd, self.shorten = env, cwd, shorten
        self.steps: list[dict[str, Any]] = []

    def short(self, text: str) -> str:
        for long, var in self.shorten:
            text = text.replace(long, var)
        return scrub(text)

    def run(self, *args: str, timeout: float = 1800) -> dict[str, Any]:
        argv = [sys.executable, "-m", "specdoctor", *args]
        log("specdoctor " + " ".join(args[:3]) + " …")
        t0 = time.perf_counter()
        p = subprocess.run(argv, env=self.env, cwd=self.cwd, capture_output=True, text=True,
                           timeout=timeout, check=False)
        step = {"command": self.short("specdoctor " + shlex.join(args)),
                "returncode": p.returncode, "seconds": round(time.perf_counter() - t0, 1),
                "stdout": self.short(p.stdout), "stderr": self.short(p.stderr)}
        self.steps.append(step)
        if p.returncode != 0:
            log(f"exit {p.returncode}: {p.stderr[-1500:]}")
        return step


def scrub(text: str) -> str:
    for long, var in MACHINE_PATHS:
        text = text.replace(long, var)
    return text


def recorded_run(step: dict[str, Any]) -> str:
    m = RECORDED.search(step["stderr"])
    if m is None:
        raise SystemExit(f"no run recorded by: {step['command']}\n{step['stderr'][-1500:]}")
    return m.group(1)


def transcript(header: list[str], steps: list[dict[str, Any]]) -> str:
    out = [*header, ""]
    for s in steps:
        out.append(f"$ {s['command']}")
        out.append(f"# exit {s['returncode']}, {s['seconds']} s")
        if s["stdout"].strip():
            out.append(s["stdout"].rstrip("\n"))
        if s["stderr"].strip():
            out.append("# stderr:")
            out.append(s["stderr"].rstrip("\n"))
        out.append("")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=None, help="lab port (default: a free one)")
    ap.add_argument("--render", action="store_true",
                    help="only rewrite the .txt from the committed .json (no server)")
    args = ap.parse_args(argv)
    if args.render:
        return render()

    from _provenance import git_commit, load, machine, utc_now

    from specdoctor import paths
    from specdoctor.bench import http
    from specdoctor.lab import train
    from specdoctor.launch import free_port

    t_start = time.perf_counter()
    models = paths.models_dir()
    target, draft = train.trained_target("ci"), train.small_drafter("ci")
    site = sysconfig.get_paths()["purelib"]
    work = Path(tempfile.mkdtemp(prefix="your-server-"))
    home = work / "home"
    env = {**os.environ, "SPECDOCTOR_HOME": str(home), "SPECDOCTOR_MODELS": str(models),
           "COLUMNS": "100", "NO_COLOR": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                       os.environ.get("PYTHONPATH")]))}
    env.pop("SPECDOCTOR_DB", None)  # the store of the fresh home: run ids start at 1
    s = Session(env, work, [(str(target), "$TARGET"), (str(draft), "$DRAFT"),
                            (str(models), "$MODELS"), (site, "$SITE"),
                            (str(home), "$SPECDOCTOR_HOME"), (str(work) + os.sep, "")])
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    meta: dict[str, Any] = {"commit": git_commit(), "date": utc_now(), "machine": machine(),
                            "load_at_start": load(), "port": port,
                            "models": {"TARGET": target.name, "DRAFT": draft.name}}
    try:
        up = s.run("lab", "up", "--method", "draft_model", "--target", "trained", "--draft",
                   "small", "--train-budget", "ci", "--port", str(port))
        if up["returncode"] != 0:
            return 1
        greedy = s.run("measure", "--url", url, "-n", str(N), "--max-tokens", str(MAX_TOKENS))
        server_log = str(home / "lab" / "logs" / f"server-{port}.log")
        s.run("logs", server_log, "--windows", "5")
        s.run("oracle", "--compare", recorded_run(greedy), "--target", str(target), "--draft",
              str(draft))
        sampled = s.run("measure", "--url", url, "-n", str(N), "--max-tokens", str(MAX_TOKENS),
                        "--temperature", str(TEMPERATURE))
        s.run("oracle", "--compare", recorded_run(sampled), "--target", str(target), "--draft",
              str(draft))
        meta["v1_models"] = s.short(http.get_text(url + "/v1/models"))
        meta["load_before_diagnose"] = load()
        s.run("diagnose", "--url", url, "--logs", server_log, "--out", "diagnose-url")
        s.run("diagnose", "--url", url, "--sampling", "greedy", "--num-prompts", "4",
              "--out", "diagnose-url-alone")
    finally:
        s.run("lab", "down", "--port", str(port))
    meta["load_after_server"] = load()
    s.run("diagnose", "--logs", server_log, "--out", "diagnose-logs")
    s.run("recon", "extract", site, "--pick", "vllm:config", "--pick", "vllm:attention",
          "-o", "snap")
    s.run("astexec", "snap/vllm/config/speculative.py", "SpeculativeConfig.compute_hash",
          "--stub", ASTEXEC_STUB, "--call", ASTEXEC_CALL)
    s.run("masks", "diff", "--code", "snap", "--impl", "fa2,flex,triton,sdpa", "--window", "4",
          "--causal", "false", "--ctx", "0..16", "--q", "4")
    meta["load_at_end"] = load()
    meta["wall_s"] = round(time.perf_counter() - t_start, 1)

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "your_server_session.json").write_text(
        json.dumps({"meta": meta, "steps": s.steps}, indent=1) + "\n")
    (RESULTS / "your_server_session.txt").write_text(transcript(header(meta), s.steps))
    log(f"wrote benchmarks/results/your_server_session.txt and .json ({meta['wall_s']} s)")
    return 0 if all(step["returncode"] == 0 for step in s.steps) else 1


def header(meta: dict[str, Any]) -> list[str]:
    return [__doc__.splitlines()[0],
            (f"commit {meta['commit']}, {meta['date']}; {meta['machine']}; load "
             f"{meta['load_at_start']} at start, {meta['load_at_end']} at end; "
             f"{meta['wall_s']} s in all"),
            (f"MODELS=$SPECDOCTOR_MODELS TARGET=$MODELS/{meta['models']['TARGET']} "
             f"DRAFT=$MODELS/{meta['models']['DRAFT']}"),
            "SITE=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')"]


def render() -> int:
    path = RESULTS / "your_server_session.json"
    res = json.loads(path.read_text())
    for step in res["steps"]:
        for key in ("command", "stdout", "stderr"):
            step[key] = scrub(step[key])
    path.write_text(json.dumps(res, indent=1) + "\n")
    (RESULTS / "your_server_session.txt").write_text(transcript(header(res["meta"]),
                                                               res["steps"]))
    log("rewrote benchmarks/results/your_server_session.txt and .json from the .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
