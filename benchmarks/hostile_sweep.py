"""Hostile input against the CLI, as a user's shell runs it: exit status, wall time, peak memory.

Every class of hostile input of issue 35 runs as its own `python -m specdoctor …` process (this
checkout's src/ first on PYTHONPATH), with a wall-clock limit; its peak resident memory is the
child's own ``ru_maxrss`` from ``os.wait4`` (the process and the children it waited for).
Judged per input: an exit status in the set the README promises for it (2: bad input, 3: the
server; never 70, "internal error"), no hang (the limit is HANG_S), peak RSS under 1 GB.

Classes: stores (another schema, no database, damaged rows), hostile HTTP servers on
127.0.0.1 (tests/cli/hostile_http.py: garbage, HTTP/0.9, huge and endless headers, a bad
Content-Length, nested JSON, a trickling body, a huge body, a /metrics of 10^6 per-position
series; each server serves at most 16 connections, each for at most 30 s) against `metrics`
and `measure`, a URL with CR/LF, kernel suites (infinite context, huge seed, 200,000 cases,
"causal": "false", --device evil), a taps dump with a non-numeric rank, a log line with a
5-million-digit number, oracle inputs (--device evil, a config holding NaN, 100,000 tokens;
the lab's built target when present), `recon extract /` and an output folder under /proc,
--temperature nan, FIFOs given as files, a 3.5 GB sparse file given to every file option read
whole, one log named twice through links, `cache ab` of a missing command, `probe run
--timeout` of a silent command, `logs | head`, and the large inputs the docs allow: a 1 GB
generated vLLM log (benchmarks/logs_speed.py's generator, its other lines varied so none
repeats within 200,000 lines) read by `logs`, `logs --json`, `logs --plot` and
`diagnose --logs`, and a /metrics dump of 10^6 series read by
`metrics`, each beside `grep -c` on the same file as the anchor of what reading it costs.

    python benchmarks/hostile_sweep.py [--log-gb 1.0] [--out benchmarks/results/hostile_sweep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import _provenance as prov

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.cli.hostile_http import MODES, HostileServer, metrics_series  # noqa: E402

HANG_S = 120.0
RSS_LIMIT_KB = 1 << 20  # 1 GiB
FIXTURE_LOG = ROOT / "tests" / "fixtures" / "vllm" / "lab-draft_model-k4" / "server.log"
BAD_INPUT, SERVER = {2}, {3}


@dataclass
class Case:
    klass: str
    name: str
    argv: list[str]
    expect: set[int]
    shell: bool = False  # argv[0] is a bash command line
    server: str | None = None  # a hostile server mode: {url} in argv is its base URL
    limit_s: float = HANG_S


@dataclass
class Outcome:
    klass: str
    name: str
    rc: int | None
    expect: list[int]
    wall_s: float
    peak_rss_mb: float
    hung: bool
    message: str
    ok: bool = field(default=False)


def run_child(argv: list[str], limit_s: float, shell: bool = False,
              env: dict[str, str] | None = None) -> tuple[int | None, float, float, bool, str]:
    """(rc, wall s, peak RSS MiB, hung, last stderr line) of one child, killed at limit_s."""
    cmd = ["bash", "-c", argv[0]] if shell else argv
    # GNU time waits for the command and writes its ru_maxrss: a small process forks it, so the
    # figure is the command's own (a child forked from this script would count this script's
    # pages between fork and exec).
    rss_file = tempfile.NamedTemporaryFile(suffix=".rss", delete=False)
    rss_file.close()
    if TIME:
        cmd = [TIME, "-f", "%M", "-o", rss_file.name] + cmd
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, cwd=ROOT, env=env,
                                start_new_session=True)
        hung = threading.Event()

        def kill() -> None:
            hung.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(limit_s, kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = [ln for ln in err.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        out.seek(0)
        said = [ln.strip() for ln in out.read(1 << 16).decode("utf-8", "replace").splitlines()
                if "windows" in ln]  # what `logs` found, when it found anything
    rc = None if hung.is_set() else proc.returncode
    lines = [ln for ln in lines if not ln.startswith("Command exited with non-zero status")]
    msg = said[0] if said and proc.returncode == 0 else lines[-1] if lines else ""
    rss_kb = usage.ru_maxrss
    try:
        rss_kb = int(Path(rss_file.name).read_text().split()[-1]) if TIME else rss_kb
    except (ValueError, IndexError):
        pass  # killed before time wrote it: the wait4 figure stands
    os.unlink(rss_file.name)
    return rc, wall, rss_kb / 1024, hung.is_set(), msg[:300]


def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
            "SPECDOCTOR_HOME": tempfile.mkdtemp(prefix="sweep-home-")}


SD = [sys.executable, "-m", "specdoctor"]
TIME = "/usr/bin/time" if Path("/usr/bin/time").is_file() else None


def vary_noise(seed: int = 1, n: int = 200_000) -> list[str]:
    """The recorded server lines logs_speed interleaves, each with its numbers redrawn."""
    import logs_speed

    rng = random.Random(seed)
    base = logs_speed.recorded_noise()
    return [re.sub(r"\d+", lambda m: str(rng.randrange(10 ** len(m.group(0)))), base[i % len(base)])
            for i in range(n)]


def make_inputs(work: Path, log_gb: float) -> dict[str, Path]:
    """Every hostile file, in ``work``."""
    f: dict[str, Path] = {}
    # stores
    f["other_schema"] = work / "other.db"
    c = sqlite3.connect(f["other_schema"])
    c.execute("CREATE TABLE runs (x)")
    c.commit()
    c.close()
    f["not_db"] = work / "notdb.db"
    f["not_db"].write_text("not a database\n" * 1000)
    for name, col, value in (("damaged_json", "result", "{bad"),
                             ("damaged_time", "created_at", 1e300)):
        f[name] = work / f"{name}.db"
        subprocess.run(SD + ["logs", str(FIXTURE_LOG), "--db", str(f[name])], cwd=ROOT,
                       env=cli_env(), capture_output=True, check=True)
        c = sqlite3.connect(f[name])
        c.execute(f"UPDATE runs SET {col} = ?", (value,))
        c.commit()
        c.close()
    # kernel suites
    suites = {"suite_inf": '[{"name": "inf", "seqs": [[Infinity, 1]]}]',
              "suite_seed": json.dumps([{"name": "s", "seqs": [[16, 1]], "seed": 10 ** 30}]),
              "suite_causal": json.dumps([{"name": "c", "seqs": [[16, 1]], "causal": "false"}]),
              "suite_big": json.dumps([{"name": f"c{i}", "seqs": [[16, 1]]}
                                       for i in range(200_000)])}
    for name, text in suites.items():
        f[name] = work / f"{name}.json"
        f[name].write_text(text)
    # a log line with a 5-million-digit number
    text = FIXTURE_LOG.read_text()
    f["digits_log"] = work / "digits.log"
    f["digits_log"].write_text(text.replace("Accepted: 136 tokens",
                                            "Accepted: " + "9" * 5_000_000 + " tokens", 1))
    # one log, three names
    f["log"] = work / "a.log"
    f["log"].write_text(text)
    (work / "sym.log").symlink_to("a.log")
    os.link(f["log"], work / "hard.log")
    (work / "sub").mkdir()
    f["astmod"] = work / "mod.py"
    f["astmod"].write_text("def pick(config):\n    return config.num_hidden_layers\n")
    # FIFOs and a 3.5 GB sparse file
    f["fifo"] = work / "fifo"
    os.mkfifo(f["fifo"])
    f["sparse"] = work / "sparse.json"
    with open(f["sparse"], "wb") as fh:
        fh.truncate(3500 << 20)
    # a taps dump with a non-numeric rank
    try:
        import torch
        from safetensors.torch import save_file

        f["taps"] = work / "taps"
        f["taps"].mkdir()
        save_file({"x": torch.zeros(2)}, str(f["taps"] / "a.safetensors"),
                  metadata={"name": "attn", "rank": "zero", "step": "0"})
    except ImportError:
        pass
    # oracle: a target config holding NaN (the lab's tiny target, its config edited)
    from specdoctor import paths

    targets = sorted(paths.models_dir().glob("control-target-llama-*"))
    if targets and (targets[0] / "config.json").is_file():
        f["target"] = targets[0]
        f["nan_target"] = work / "nan-target"
        f["nan_target"].mkdir()
        cfg = (targets[0] / "config.json").read_text()
        (f["nan_target"] / "config.json").write_text(
            re.sub(r'"rms_norm_eps": [^,}]+', '"rms_norm_eps": NaN', cfg))
        for p in targets[0].iterdir():
            if p.name != "config.json":
                (f["nan_target"] / p.name).symlink_to(p)
    # a /metrics dump of 10^6 per-position series
    f["metrics_1e6"] = work / "metrics_1e6.txt"
    with open(f["metrics_1e6"], "wb") as fh:
        for block in metrics_series(1_000_000):
            fh.write(block)
    f["metrics_5e5"] = work / "metrics_5e5.txt"  # under the size limit: the series cap holds
    with open(f["metrics_5e5"], "wb") as fh:
        for block in metrics_series(500_000):
            fh.write(block)
    # the 1 GB log
    import logs_speed

    NOISE[:] = vary_noise()
    logs_speed.recorded_noise = lambda: NOISE  # type: ignore[attr-defined]
    f["big_log"] = work / "big.log"
    truth = logs_speed.build(f["big_log"], int(log_gb * (1 << 30)), "eagle3", 3, 20)
    NOISE.clear()
    f["big_log_windows"] = Path(str(truth.windows))  # carried as text
    return f


NOISE: list[str] = []


def cases(f: dict[str, Path]) -> list[Case]:
    s = lambda p: str(f[p])  # noqa: E731
    out = [
        Case("store", "another schema", ["runs", "--db", s("other_schema")], BAD_INPUT),
        Case("store", "no database", ["runs", "--db", s("not_db")], BAD_INPUT),
        Case("store", "damaged JSON row", ["runs", "1", "--db", s("damaged_json")], BAD_INPUT),
        Case("store", "time past 9999", ["runs", "--db", s("damaged_time")], BAD_INPUT),
        Case("store", "logs into another schema", ["logs", s("log"), "--db", s("other_schema")],
             BAD_INPUT),
    ]
    for mode in MODES:
        out.append(Case("server", f"metrics {mode}", ["metrics", "{url}/metrics", "--no-store"],
                        SERVER, server=mode))
        out.append(Case("server", f"measure {mode}", ["measure", "--url", "{url}", "-n", "1",
                                                      "--no-store"], SERVER, server=mode))
    out += [
        Case("server", "diagnose --url garbage", ["diagnose", "--url", "{url}", "--no-store"],
             SERVER, server="garbage"),
        Case("server", "gate trickle, --request-timeout 5",
             ["gate", "--baseline", str(ROOT / "tests" / "fixtures" / "gate" / "demo-baseline.json"),
              "--url", "{url}", "--request-timeout", "5"], SERVER, server="trickle", limit_s=300),
        Case("url", "CR/LF in a URL", ["metrics", "http://127.0.0.1:9/\r\nX-Evil: 1"], BAD_INPUT),
        Case("kernels", "infinite context", ["kernels", "check", "--suite", s("suite_inf")],
             BAD_INPUT),
        Case("kernels", "huge seed", ["kernels", "check", "--suite", s("suite_seed")], BAD_INPUT),
        Case("kernels", "200,000 cases", ["kernels", "check", "--suite", s("suite_big")],
             BAD_INPUT),
        Case("kernels", '"causal": "false"', ["kernels", "check", "--suite", s("suite_causal")],
             BAD_INPUT),
        Case("kernels", "--device evil", ["kernels", "check", "--suite", "smoke", "--device",
                                          "evil"], BAD_INPUT),
        Case("logs", "5-million-digit number", ["logs", s("digits_log"), "--no-store"], {0}),
        Case("logs", "symlink twice", ["logs", s("log"), str(f["log"].parent / "sym.log"),
                                       "--no-store"], BAD_INPUT),
        Case("logs", "hard link twice", ["logs", s("log"), str(f["log"].parent / "hard.log"),
                                         "--no-store"], BAD_INPUT),
        Case("logs", "../ twice", ["logs", s("log"), str(f["log"].parent / "sub" / ".." / "a.log"),
                                   "--no-store"], BAD_INPUT),
        Case("logs", "logs | head", [f"{' '.join(SD)} logs {s('log')} --no-store --windows 100 "
                                     "| head -1; exit ${PIPESTATUS[0]}"], {0}, shell=True),
        Case("recon", "extract /", ["recon", "extract", "/", "-o", str(f["log"].parent / "rx")],
             BAD_INPUT | {0}, limit_s=300),
        Case("recon", "output under /proc", ["recon", "extract", str(ROOT / "src"), "-o",
                                             "/proc/specdoctor-out"], BAD_INPUT),
        Case("options", "--temperature nan", ["measure", "--url", "http://127.0.0.1:9",
                                              "--temperature", "nan"], BAD_INPUT),
        Case("cache", "ab of a missing command", ["cache", "ab", "--port", "18123", "--",
                                                  "no-such-server-cmd", "--port", "18123"],
             BAD_INPUT),
        Case("probe", "run --timeout 3 of a silent command",
             ["probe", "run", "startup", "--timeout", "3", "--", "sleep", "60"], {0}, limit_s=20),
    ]
    for what, argv in (("logs", ["logs", s("fifo"), "--no-store"]),
                       ("metrics", ["metrics", s("fifo"), "--no-store"]),
                       ("kernels suite", ["kernels", "check", "--suite", s("fifo")]),
                       ("gate --baseline", ["gate", "--baseline", s("fifo"), "--url",
                                            "http://127.0.0.1:9"])):
        out.append(Case("fifo", f"a FIFO as {what}", argv, BAD_INPUT, limit_s=30))
    for what, argv in (("gate --baseline", ["gate", "--baseline", s("sparse"), "--url",
                                            "http://127.0.0.1:9"]),
                       ("diagnose --reference", ["diagnose", "--logs", s("log"), "--reference",
                                                 s("sparse"), "--no-store"]),
                       ("bench --dataset", ["bench", "--dataset", s("sparse"), "--url",
                                            "http://127.0.0.1:9"]),
                       ("kernels --suite", ["kernels", "check", "--suite", s("sparse")]),
                       ("astexec --config", ["astexec", s("astmod"), "pick", "--config",
                                             s("sparse"), "--call", "pick(config)"]),
                       ("probe build", ["probe", "build", s("sparse"), "-o",
                                        str(f["log"].parent / "pb")]),
                       ("metrics", ["metrics", s("sparse"), "--no-store"])):
        out.append(Case("3.5 GB file", what, argv, BAD_INPUT))
    if "taps" in f:
        out.append(Case("taps", "non-numeric rank", ["taps", "check", s("taps")], BAD_INPUT))
    if "target" in f:
        t = s("target")
        out += [
            Case("oracle", "--device evil", ["oracle", "--target", t, "--method", "ngram",
                                             "--device", "evil", "--no-store"], BAD_INPUT),
            Case("oracle", "100,000 tokens", ["oracle", "--target", t, "--method", "ngram",
                                              "--max-tokens", "100000", "--no-store"], BAD_INPUT),
            Case("oracle", "config with NaN", ["oracle", "--target", s("nan_target"), "--method",
                                               "ngram", "--no-store"], BAD_INPUT),
            Case("oracle", "--vocab-map 3.5 GB", ["oracle", "--target", t, "--draft", t,
                                                  "--vocab-map", s("sparse"), "--no-store"],
                 BAD_INPUT),
        ]
    out += [
        Case("large", "metrics: 10^6 series dump", ["metrics", s("metrics_1e6"), "--no-store"],
             BAD_INPUT),
        Case("large", "metrics: 5x10^5 series dump", ["metrics", s("metrics_5e5"), "--no-store"],
             BAD_INPUT),
        Case("large", "metrics: 5x10^5 series on stdin",
             [f"{' '.join(SD)} metrics - --no-store < {s('metrics_5e5')}"], BAD_INPUT, shell=True),
        Case("large", "logs: 1 GB log", ["logs", s("big_log"), "--no-store", "--windows", "0"],
             {0}, limit_s=900),
        Case("large", "logs --json: 1 GB log",
             [f"{' '.join(SD)} logs {s('big_log')} --no-store --json > /dev/null"], {0},
             shell=True, limit_s=900),
        Case("large", "logs --plot: 1 GB log",
             ["logs", s("big_log"), "--no-store", "--windows", "0", "--plot",
              str(f["big_log"].parent / "big_log.png")], {0}, limit_s=900),
        Case("large", "diagnose --logs: 1 GB log",
             ["diagnose", "--logs", s("big_log"), "--no-store"], {0}, limit_s=900),
    ]
    return out


def anchors(f: dict[str, Path]) -> list[dict[str, object]]:
    """grep -c on the two large files: what reading each once costs, for scale."""
    out = []
    for what, path, needle in (("the large log", f["big_log"], "SpecDecoding metrics"),
                               ("10^6 series dump", f["metrics_1e6"], "spec_decode")):
        rc, wall, rss, _, _ = run_child(["grep", "-c", "-F", needle, str(path)], 600)
        count = subprocess.run(["grep", "-c", "-F", needle, str(path)], capture_output=True,
                               text=True).stdout.strip()
        out.append({"file": what, "bytes": path.stat().st_size, "grep_c": count,
                    "grep_wall_s": round(wall, 2), "grep_peak_rss_mb": round(rss, 1)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log-gb", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "hostile_sweep")
    ap.add_argument("--only", default=None, help="Only the classes whose name holds this.")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hostile-sweep-"))
    try:
        t0 = time.monotonic()
        f = make_inputs(work, args.log_gb)
        print(f"inputs made in {time.monotonic() - t0:.0f} s", file=sys.stderr)
        env = cli_env()
        results: list[Outcome] = []
        for case in cases(f):
            if args.only and args.only not in case.klass:
                continue
            server = HostileServer(case.server) if case.server else None
            argv = case.argv
            if server is not None:
                url = server.__enter__()
                argv = [a.replace("{url}", url) for a in argv]
            try:
                full = argv if case.shell else SD + argv
                rc, wall, rss, hung, msg = run_child(full, case.limit_s, case.shell, env)
            finally:
                if server is not None:
                    server.__exit__()
            o = Outcome(case.klass, case.name, rc, sorted(case.expect), round(wall, 2),
                        round(rss, 1), hung, prov.scrub(msg.replace(str(work), "$WORK")))
            o.ok = (not hung and rc in case.expect and rc != 70 and rss * 1024 < RSS_LIMIT_KB)
            results.append(o)
            print(f"{'ok ' if o.ok else 'BAD'} {o.klass:12} {o.name:38} rc={o.rc} "
                  f"{o.wall_s:7.2f}s {o.peak_rss_mb:8.1f}MB  {o.message[:90]}", file=sys.stderr)
        anchor = anchors(f) if not args.only else []
        window_truth = str(f["big_log_windows"])
        write(args.out, results, anchor, window_truth, args.log_gb)
    finally:
        subprocess.run(["rm", "-rf", str(work)])


def write(out: Path, results: list[Outcome], anchor: list[dict[str, object]], windows: str,
          log_gb: float) -> None:
    bad = [r for r in results if not r.ok]
    internal = sum(r.rc == 70 for r in results)
    hangs = sum(r.hung for r in results)
    peak = max(r.peak_rss_mb for r in results)
    head = {"commit": prov.git_commit(), "date": prov.utc_now(), "machine": prov.machine(),
            "load": prov.load(), "inputs": len(results), "failed": len(bad),
            "exit_70": internal, "hangs": hangs, "peak_rss_mb_max": peak,
            "big_log_windows_written": int(windows), "log_gb": log_gb}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(
        {**head, "anchors": anchor, "results": [asdict(r) for r in results]}, indent=1) + "\n")
    lines = [
        "# benchmarks/hostile_sweep.py: hostile input against the CLI, one process per input",
        f"commit {head['commit']} · {head['date']} · {head['machine']} · load {head['load']}",
        "",
        f"{len(results)} inputs: {len(results) - len(bad)} as promised, {len(bad)} not; "
        f"{internal} exit 70, {hangs} hangs (limit {HANG_S:.0f} s unless stated), "
        f"largest peak RSS {peak:.0f} MB (target < 1024 MB)",
        "",
        f"{'':4}{'class':13}{'input':40}{'rc':>4}{'want':>7}{'wall s':>9}{'RSS MB':>9}  message",
    ]
    for r in results:
        want = ",".join(map(str, r.expect))
        lines.append(f"{'ok' if r.ok else 'BAD':4}{r.klass:13}{r.name:40}{str(r.rc):>4}"
                     f"{want:>7}{r.wall_s:9.2f}{r.peak_rss_mb:9.1f}  {r.message[:110]}")
    if anchor:
        lines += ["", "Anchors: grep -c -F on the same large files (reading each once):"]
        for a in anchor:
            lines.append(f"  {a['file']}: {a['bytes']:,} bytes, grep -c {a['grep_c']}, "
                         f"{a['grep_wall_s']} s, peak RSS {a['grep_peak_rss_mb']} MB")
        lines.append(f"  the large log's generator wrote {windows} metrics lines (windows)")
    out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
