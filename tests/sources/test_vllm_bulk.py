"""The bulk reading of vLLM logs (blocks of grep text, a table of distinct payloads, sums in
numpy) gives exactly what reading line by line gives: same windows, totals and intervals."""

import json
import random
from pathlib import Path

import numpy as np
import pytest

from specdoctor.acceptance.bootstrap import UnitBlocks, bootstrap_intervals
from specdoctor.acceptance.profile import AcceptanceProfile, ProfileSum, sum_profiles
from specdoctor.sources import scan, vllm_log
from specdoctor.sources.base import SkippedLines
from specdoctor.sources.logs import read_logs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "vllm"
RECORDED = sorted(FIXTURES.glob("lab-*/server.log"))
STARTUP = ("(EngineCore pid=1) INFO 11-29 08:28:48 [core.py:133] Initializing a V1 LLM engine "
           "(v0.32.0) with config: model='m', speculative_config=SpeculativeConfig(method='{m}', "
           "model=None, num_spec_tokens=3), tokenizer='m'")


def v1_line(rng: random.Random, k: int, variable: bool) -> str:
    """A metrics line formatted as vllm/v1/spec_decode/metrics.py formats it, varied counts."""
    d = rng.choice([rng.randint(1, 6), rng.randint(1, 60), rng.randint(1000, 2500)])
    per_pos, prev = [], d
    for _ in range(k):
        prev = rng.randint(0, prev)
        per_pos.append(prev)
    if rng.random() < 0.05:
        per_pos = [0] * k
    drafted = rng.randint(d, d * k) if variable else d * k
    if rng.random() < 0.03:
        d = drafted = 0
        per_pos = [0] * k
    acc = sum(per_pos)
    rates = ", ".join(f"{a / d:.3f}" if d else "nan" for a in per_pos)
    return (f"(APIServer pid=7) INFO 11-29 08:{rng.randint(0, 59):02d}:00 [metrics.py:120] "
            "SpecDecoding metrics: Mean acceptance length: %s, Accepted throughput: %.2f tokens/s, "
            "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
            "Per-position acceptance rate: %s, Avg Draft acceptance rate: %s%%"
            % ("%.2f" % (1 + acc / d) if d else "nan", rng.random() * 50, rng.random() * 90, acc,
               drafted, rates, "%.1f" % (100 * acc / drafted) if drafted else "nan"))


def odd(rng: random.Random, line: str) -> str:
    """The line as logs sometimes hold it: cut short, CRLF, forked, early V1, doubled..."""
    r = rng.random()
    if r < 0.04:
        return line[: rng.randint(20, len(line) - 1)]
    if r < 0.08:
        return line + rng.choice(["\r", "  ", " \r"])
    if r < 0.10:
        return line.replace(" tokens, Per", " tokens, Rejected: 3 tokens, Per")
    if r < 0.12:
        return ("INFO 05-01 10:00:00 SpecDecoding metrics: Draft acceptance rate: 36.8%, "
                "Accepted: 21 tokens, Drafted: 57 tokens")
    if r < 0.13:
        return "SpecDecoding metrics: junk, x, y, z " + line
    if r < 0.14:
        return line.replace("Accepted throughput: ", "Accepted throughput: 1,")
    if r < 0.15:
        return "x" * 130 + line
    return line


def write_log(path: Path, seed: int, n: int, method: str | None, flip_at: int | None = None,
              repeat: float = 0.5) -> Path:
    rng = random.Random(seed)
    lines = [STARTUP.format(m=method)] if method else []
    seen: list[str] = []
    for i in range(n):
        lines.append("INFO noise GET /v1/models 200")
        if seen and rng.random() < repeat:
            lines.append(rng.choice(seen))
            continue
        variable = method == "ngram" or (flip_at is not None and i >= flip_at)
        line = odd(rng, v1_line(rng, 3 if variable else 4, variable))
        seen.append(line)
        lines.append(line)
    path.write_bytes(("\n".join(lines) + "\n").encode())
    return path


def line_by_line(paths: list[Path], drafter: str):
    """What read_logs returns, read the plain way: every line through ``feed``, one parser per
    file; the bootstrap over the windows file by file, files in the order of their names (each
    window its own block: these logs hold fewer than 1000 windows a file)."""
    windows, by_file, notes = [], {}, []
    skipped = SkippedLines()
    for p in paths:
        parser = vllm_log.VllmLogParser(drafter)  # type: ignore[arg-type]
        mine = []
        for n, line in scan.head_lines_with(str(p), b"speculative_config"):
            parser.feed(str(p), n, line)
        for n, line in scan.iter_marked_lines(str(p), (b"metrics:",)):
            mine.extend(parser.feed(str(p), n, line))
        mine.extend(parser.finish())
        windows.extend(mine)
        by_file[str(p)] = mine
        skipped.merge(parser.skipped)
        notes.extend(f"{p}: {n}" if len(paths) > 1 else n for n in parser.notes)
    profiles = [w.profile for w in windows]
    ordered = [w.profile for name in sorted(by_file) for w in by_file[name]]
    total = sum_profiles(profiles).with_intervals(bootstrap_intervals(ordered))
    return windows, total, skipped, notes


def as_json(x) -> str:
    """JSON text, without the wording of why an interval is unavailable (whether it is, is
    compared through ci95)."""
    if isinstance(x, dict):
        x = {k: v for k, v in x.items() if k != "ci95_unavailable"}
    return json.dumps(x, sort_keys=False)


def assert_same(paths: list[Path], drafter: str, by_file: bool = False) -> None:
    windows, total, skipped, notes = line_by_line(paths, drafter)
    got = read_logs(paths, "vllm", drafter, keep_windows=True, by_file=by_file)
    expected = as_json([w.to_json() for w in windows])
    assert as_json([w.to_json() for w in got.reading.windows]) == expected
    assert as_json(got.total.to_json()) == as_json(total.to_json())
    assert got.reading.skipped.to_json() == skipped.to_json()
    assert got.reading.notes == notes
    lean = read_logs(paths, "vllm", drafter, keep_windows=False, last_windows=7, by_file=by_file)
    assert as_json(lean.total.to_json()) == as_json(total.to_json())
    assert lean.window_count == len(windows)
    assert [w.to_json() for w in lean.last_windows] == [w.to_json() for w in windows[-7:]]


@pytest.mark.parametrize("log", RECORDED, ids=[p.parent.name for p in RECORDED])
@pytest.mark.parametrize("drafter", ["auto", "fixed", "variable"])
def test_recorded_logs_read_the_same_in_bulk(log, drafter):
    assert_same([log], drafter)


def test_recorded_logs_together_read_the_same_in_bulk():
    assert_same(RECORDED, "auto", by_file=True)
    assert_same(RECORDED[::-1], "auto", by_file=True)


@pytest.mark.parametrize("method,flip_at", [("draft_model", None), ("ngram", None), (None, None),
                                            (None, 150)])
@pytest.mark.parametrize("drafter", ["auto", "fixed", "variable"])
def test_odd_lines_read_the_same_in_bulk(tmp_path, method, flip_at, drafter):
    log = write_log(tmp_path / "a.log", hash((method, flip_at)) % 1000, 400, method, flip_at)
    assert_same([log], drafter)


def test_a_small_table_refills_without_changing_anything(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_log, "TABLE_CAPACITY", 5)
    logs = [write_log(tmp_path / "a.log", 1, 300, "draft_model", repeat=0.3),
            write_log(tmp_path / "b.log", 2, 300, None, flip_at=100)]
    assert_same(logs, "auto", by_file=True)
    assert_same(logs[::-1], "auto", by_file=True)


def test_small_text_blocks_split_runs_anywhere(tmp_path, monkeypatch):
    log = write_log(tmp_path / "a.log", 3, 300, None, flip_at=120)
    real = scan.iter_marked_text
    monkeypatch.setattr("specdoctor.sources.scan.iter_marked_text",
                        lambda path, wanted: real(path, wanted, block_size=300))
    assert_same([log], "auto")


@pytest.mark.parametrize("log", RECORDED, ids=[p.parent.name for p in RECORDED])
def test_text_blocks_hold_the_marked_lines(tmp_path, log):
    crlf = tmp_path / "crlf.log"
    crlf.write_bytes(log.read_bytes().replace(b"\n", b"\r\n") + b"\xff\xfe SpecDecoding metrics: x")
    for path in (log, crlf):
        lines = list(scan.iter_marked_lines(str(path), (b"metrics:",)))
        for size in (64, 1 << 22):
            text = "".join(scan.iter_marked_text(str(path), (b"metrics:",), size))
            got = [(int(n), line.rstrip("\r")) for n, _, line in
                   (s.partition(":") for s in text.split("\n")[:-1])]
            assert got == lines


def test_python_scan_blocks_match_grep(tmp_path, monkeypatch):
    log = RECORDED[0]
    via_grep = "".join(scan.iter_marked_text(str(log), (b"metrics:",)))
    monkeypatch.setattr(scan.shutil, "which", lambda name: None)
    assert "".join(scan.iter_marked_text(str(log), (b"metrics:",))) == via_grep


def _unit(rng: random.Random) -> AcceptanceProfile:
    k = rng.randint(1, 5)
    pos = tuple(sorted((rng.randint(0, 50) for _ in range(k)), reverse=True))
    return AcceptanceProfile(rng.randint(50, 60), rng.randint(60, 300), sum(pos),
                             pos if rng.random() > 0.01 else None, k)


@pytest.mark.parametrize("seed", range(6))
def test_unit_blocks_in_bulk_equal_one_at_a_time(seed):
    rng = random.Random(seed)
    units = [_unit(rng) for _ in range(rng.randint(1, 5000))]
    if seed % 2:
        units.insert(rng.randint(0, len(units)), AcceptanceProfile(None, 5, 3, None, 2))
    one, bulk = UnitBlocks(max_blocks=20), UnitBlocks(max_blocks=20)
    for u in units:
        one.add(u)
    i = 0
    while i < len(units):
        batch = units[i: i + rng.randint(1, 700)]
        i += len(batch)
        bad = next((j for j, u in enumerate(batch) if u.drafts is None), len(batch))
        ok = batch[:bad]
        width = 3 + max((len(u.accepted_per_position or ()) for u in ok), default=0)
        rows = np.zeros((len(ok), width), dtype=np.int64)
        for r, u in enumerate(ok):
            vals = [u.drafts, u.draft_tokens, u.accepted_tokens, *(u.accepted_per_position or ())]
            rows[r, : len(vals)] = vals
        bulk.add_rows(rows, all(u.accepted_per_position is not None for u in ok), len(batch) - bad)
    state = (bulk.units, bulk.size, bulk.usable, bulk.has_pos)
    assert state == (one.units, one.size, one.usable, one.has_pos)
    assert bulk.intervals(resamples=200) == one.intervals(resamples=200)


def test_profile_sum_of_a_sum_counts_its_windows():
    rng = random.Random(1)
    units = [_unit(rng) for _ in range(40)]
    one, bulk = ProfileSum(), ProfileSum()
    for u in units:
        one.add(u)
    bulk.add(sum_profiles(units[:25]), windows=25)
    bulk.add(sum_profiles(units[25:]), windows=15)
    assert one.n == bulk.n and one.result() == bulk.result()


@pytest.mark.parametrize("log", RECORDED, ids=[p.parent.name for p in RECORDED])
def test_current_format_lines_go_through_the_table(log):
    parser = vllm_log.VllmLogParser("auto")
    for n, line in scan.head_lines_with(str(log), b"speculative_config"):
        parser.feed(str(log), n, line)
    text = "".join(scan.iter_marked_text(str(log), (b"metrics:",)))
    pieces = list(parser.feed_text(str(log), text))
    runs = [p for p in pieces if isinstance(p, vllm_log.FastRun)]
    assert runs and sum(len(r.ids) for r in runs) == text.count("SpecDecoding metrics:")
