"""Time `recon extract --pick vllm` on a >= 1 GB image archive beside `tar -tf` on the same file.

    python benchmarks/recon_extract.py --wheel vllm-0.28.0-...whl [--workdir /var/tmp/sd-bench]

The archive is a `docker save`-style tar built from real content: layer 1 is a
vLLM wheel's files, layer 2 the installed torch package, layer 3 the installed
vLLM (an upgrade: files the old version had and the new one lacks get
whiteouts). Built once into --workdir, reused after.

Measured --repeat times each, interleaved (anchor, then ours, in every round, so a change in
the machine's load hits both), page cache warm for all of them; min / median / max:
- `tar -tf FILE`       GNU tar lists the outer tar (it seeks over member bodies)
- `tar -tf - < FILE`   the anchor: the same, forced to read every byte sequentially
- `recon extract`      the whole command, Python start-up included
- `python -m specdoctor --version`: start-up alone (interpreter, click, the CLI)
The ratio is taken per round (ours / the anchor of the same round). Then where the time goes:
one in-process extract under cProfile (start-up excluded), its top functions by own time; and
the extractor's peak RSS on this archive and on one about half its size, to show memory does
not grow with the archive. The load average is printed for every round. Results go to
benchmarks/results/recon_extract.txt. Not a test: it writes gigabytes.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

SITE = "usr/local/lib/python3.12/dist-packages"
RESULTS = Path(__file__).parent / "results" / "recon_extract.txt"


def _installed(pkg: str) -> Path:
    spec = importlib.util.find_spec(pkg)
    assert spec is not None and spec.submodule_search_locations, f"{pkg} is not installed"
    return Path(next(iter(spec.submodule_search_locations)))


def _layer_from_wheel(wheel: Path, out: Path) -> set[str]:
    names = set()
    with zipfile.ZipFile(wheel) as zf, tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            ti = tarfile.TarInfo(f"{SITE}/{info.filename}")
            ti.size, ti.mode, ti.mtime = info.file_size, 0o644, 0
            with zf.open(info) as fh:
                tf.addfile(ti, fh)
            names.add(info.filename)
    return names


def _layer_from_dirs(dirs: list[Path], out: Path, whiteouts: set[str] | None = None) -> set[str]:
    names = set()
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tf:
        for d in dirs:
            for path in sorted(d.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    rel = path.relative_to(d.parent).as_posix()
                    tf.add(path, arcname=f"{SITE}/{rel}", recursive=False)
                    names.add(rel)
        for rel in sorted(whiteouts or ()):
            parent, _, base = rel.rpartition("/")
            ti = tarfile.TarInfo(f"{SITE}/{parent + '/' if parent else ''}.wh.{base}")
            tf.addfile(ti, io.BytesIO(b""))
    return names


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _assemble(layers: list[Path], out: Path) -> None:
    diff_ids = [f"sha256:{_sha256(p)}" for p in layers]
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
    cid = hashlib.sha256(config).hexdigest()
    names = [f"blobs/sha256/{d.split(':')[1]}" for d in diff_ids]
    manifest = json.dumps([{"Config": f"blobs/sha256/{cid}", "RepoTags": ["bench/vllm:upgrade"],
                            "Layers": names}]).encode()
    with tarfile.open(out, "w") as tf:
        for name, layer in zip(names, layers, strict=True):
            tf.add(layer, arcname=name)
        for name, data in ((f"blobs/sha256/{cid}", config), ("manifest.json", manifest)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))


def build(workdir: Path, wheel: Path) -> tuple[Path, Path]:
    big, half = workdir / "image-big.tar", workdir / "image-half.tar"
    if big.exists() and half.exists() and (workdir / "built-v2").exists():
        return big, half
    vllm_new, torch_dir = _installed("vllm"), _installed("torch")
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        t = Path(tmp)
        old = _layer_from_wheel(wheel, t / "l1.tar")
        _layer_from_dirs([torch_dir], t / "l2.tar")
        old_vllm = {n for n in old if n.startswith("vllm/")}
        installed = {p.relative_to(vllm_new.parent).as_posix() for p in vllm_new.rglob("*")
                     if p.is_file()}
        # An upgrade: the new package and its dist-info; the old files and dist-info whited out.
        new_dist = sorted(vllm_new.parent.glob("vllm*.dist-info"))
        old_dist = {n.split("/", 1)[0] for n in old if n.split("/", 1)[0].endswith(".dist-info")}
        _layer_from_dirs([vllm_new, *new_dist], t / "l3.tar",
                         whiteouts=(old_vllm - installed) | old_dist)
        _assemble([t / "l1.tar", t / "l2.tar", t / "l3.tar"], big)
        _assemble([t / "l1.tar"], half)
    (workdir / "built-v2").touch()
    return big, half


def _once(cmd: list[str], stdin: Path | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as fin:
        subprocess.run(cmd, stdin=fin, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _mmm(xs: list[float], fmt: str = "{:.2f}") -> str:
    return " / ".join(fmt.format(x) for x in (min(xs), statistics.median(xs), max(xs)))


def _profile(archive: Path, out: Path, top: int = 12) -> list[str]:
    """Top functions by own time of one in-process extract (start-up excluded)."""
    code = ("import cProfile, pstats, io; from pathlib import Path; "
            "from specdoctor.recon.extract import extract; "
            "pr = cProfile.Profile(); pr.enable(); "
            f"extract({str(archive)!r}, Path({str(out)!r}), ['vllm']); pr.disable(); "
            "s = io.StringIO(); st = pstats.Stats(pr, stream=s); "
            "total = sum(v[2] for v in st.stats.values()); print('total', round(total, 3)); "
            f"rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:{top}]; "
            "[print(round(v[2], 3), v[1], f'{k[0].split(\"site-packages/\")[-1].split(\"src/\")[-1]}:{k[1]}:{k[2]}') "
            "for k, v in rows]")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return res.stdout.splitlines()


def _extract_rss(archive: Path, out: Path) -> tuple[float, float, int]:
    """Wall time, CPU time and peak RSS (KiB) of one extract, start-up excluded."""
    code = ("import resource, sys, time; from pathlib import Path; "
            "from specdoctor.recon.extract import extract; "
            "r = resource.getrusage(resource.RUSAGE_SELF); t = time.perf_counter(); "
            f"extract({str(archive)!r}, Path({str(out)!r}), ['vllm']); "
            "e = resource.getrusage(resource.RUSAGE_SELF); "
            "print(time.perf_counter() - t, e.ru_utime - r.ru_utime + e.ru_stime - r.ru_stime, "
            "e.ru_maxrss)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    secs, cpu, rss = res.stdout.split()
    return float(secs), float(cpu), int(rss)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wheel", type=Path, required=True, help="a vLLM wheel (pip download vllm==X)")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "specdoctor-bench")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    reused = (args.workdir / "built-v2").exists()
    big, half = build(args.workdir, args.wheel)
    built = "reused from --workdir" if reused else f"built in {time.perf_counter() - t0:.0f} s"
    size = big.stat().st_size
    out = args.workdir / "snap"
    extract_cmd = [sys.executable, "-m", "specdoctor", "recon", "extract", str(big),
                   "--pick", "vllm", "-o", str(out), "--json"]
    subprocess.run(["tar", "-tf", str(big)], stdout=subprocess.DEVNULL, check=True)  # warm cache
    subprocess.run(f"cat {big} > /dev/null", shell=True, check=True)
    version_cmd = [sys.executable, "-m", "specdoctor", "--version"]
    rounds: list[dict[str, float]] = []
    for _ in range(args.repeat):
        r = {"load": os.getloadavg()[0]}
        r["seek"], r["seek_cpu"] = _once(["tar", "-tf", str(big)])
        r["seq"], r["seq_cpu"] = _once(["tar", "-tf", "-"], stdin=big)
        r["ours"], r["ours_cpu"] = _once(extract_cmd)
        r["start"], r["start_cpu"] = _once(version_cmd)
        rounds.append(r)
        print(json.dumps({k: round(v, 3) for k, v in r.items()}), file=sys.stderr, flush=True)

    def col(key: str) -> list[float]:
        return [r[key] for r in rounds]

    ratio = [r["ours"] / r["seq"] for r in rounds]
    ratio_cpu = [r["ours_cpu"] / r["seq_cpu"] for r in rounds]
    inproc = [r["ours"] - r["start"] for r in rounds]
    inproc_big, inproc_cpu, rss_big = _extract_rss(big, out)
    inproc_half, _, rss_half = _extract_rss(half, args.workdir / "snap-half")
    prof = _profile(big, args.workdir / "snap-prof")
    snap = json.loads((out / "manifest.json").read_text())
    commit = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), "rev-parse",
                             "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [
        f"recon extract benchmark (commit {commit}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        "page cache warm)",
        f"archive: docker-archive, 3 layers ({args.wheel.name} files, torch, installed vLLM with "
        f"whiteouts), {size / 2**30:.2f} GiB; {built}",
        f"picked: preset vllm -> {len(snap['files'])} files, "
        f"{sum(f['size'] for f in snap['files']) / 2**20:.1f} MiB",
        "",
        f"{args.repeat} interleaved rounds; load average (1 min) at each round's start: "
        f"{', '.join(f'{x:.1f}' for x in col('load'))} on {os.cpu_count()} cores",
        "min / median / max              wall s                cpu s (user+sys)",
        f"tar -tf FILE                    {_mmm(col('seek')):20}  {_mmm(col('seek_cpu'))}"
        "   (GNU tar seeks over bodies)",
        f"tar -tf - < FILE (anchor)       {_mmm(col('seq')):20}  {_mmm(col('seq_cpu'))}"
        "   (every byte read in order)",
        f"recon extract (command)         {_mmm(col('ours')):20}  {_mmm(col('ours_cpu'))}"
        "   (Python start-up included)",
        f"specdoctor --version (start-up) {_mmm(col('start')):20}  {_mmm(col('start_cpu'))}",
        f"ratio to the anchor, per round: {_mmm(ratio)} wall, {_mmm(ratio_cpu)} cpu "
        "(target 1.5x wall)",
        f"command minus start-up, per round: {_mmm(inproc)} s wall "
        f"({_mmm([x / r['seq'] for x, r in zip(inproc, rounds)])}x the anchor)",
        f"recon extract in-process, once: {inproc_big:.2f} s wall, {inproc_cpu:.2f} s cpu "
        f"({inproc_cpu / statistics.median(col('seq_cpu')):.2f}x the anchor's median cpu)",
        *([f"note: the anchor's median wall is {waited:.0f}x its CPU time, so its reads waited on "
           "the disk (the page cache did not keep the archive, or the cores were busy): the "
           "wall ratio then measures the machine's contention; the CPU ratio is the steadier "
           "figure"] if (waited := statistics.median(col("seq")) /
                        max(statistics.median(col("seq_cpu")), 1e-9)) > 3 else []),
        "",
        f"peak RSS: {rss_big / 1024:.0f} MiB on {size / 2**30:.2f} GiB, "
        f"{rss_half / 1024:.0f} MiB on {half.stat().st_size / 2**30:.2f} GiB "
        f"(in-process {inproc_half:.2f} s)",
        "",
        "where the in-process time goes (cProfile, own time s, calls, function; profiling "
        "slows Python code, so read the shares, not the seconds):",
        *(f"  {line}" for line in prof),
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
