"""Cache scan on both on-disk layouts, with launches read from start-up log lines recorded
from a real lab server (fixtures/draft_model_k4.log; its header says how)."""

from __future__ import annotations

import json
from pathlib import Path

from specdoctor.experiments.compile_cache import scan
from tests.conftest import run_cli

FIXTURE = Path(__file__).parent / "fixtures" / "draft_model_k4.log"
KEYS = ("55890a7f03c5c27b65688c878fff778f8f0707ec314215c92071384e51aa6407",
        "e3274c899572a32e1698e9532352d009337f3ba62c697528cf446074d0a62642")


def _aot_tree(root: Path) -> None:
    for i, key in enumerate(KEYS):
        d = root / "torch_compile_cache" / "torch_aot_compile" / key
        (d / "rank_0_0").mkdir(parents=True)
        (d / "rank_0_0" / "model").write_bytes(b"x" * (100 + i))
        (d / "inductor_cache").mkdir()
        (d / "inductor_cache" / "a.py").write_bytes(b"y" * 50)


def _log(root: Path, tmp: Path, name: str, k: int | None = None) -> Path:
    text = FIXTURE.read_text().replace("CACHE_ROOT", str(root))
    if k is not None:  # the same lines under another k (vllm#53366: the keys ignore k)
        text = text.replace("num_spec_tokens=4", f"num_spec_tokens={k}")
    p = tmp / name
    p.write_text(text)
    return p


def test_aot_entries_get_their_tag_and_launch_from_the_log(tmp_path):
    root = tmp_path / "vllm"
    _aot_tree(root)
    res = scan.scan(root, [_log(root, tmp_path, "a.log")])
    assert [(e.layout, e.key, e.rank, e.tag) for e in res.entries] == [
        ("aot", KEYS[0], 0, "backbone"), ("aot", KEYS[1], 0, "draft_model")]
    assert res.entries[0].size_bytes == 150 and res.entries[1].size_bytes == 151
    uses = res.entries[0].uses
    assert [u.action for u in uses] == ["load-failed", "saved"]
    assert "finalize_loading" in uses[0].reason
    assert "num_spec_tokens=4" in uses[1].spec
    assert res.shared_keys() == []  # one launch config only


def test_keys_shared_by_different_spec_configs_are_flagged(tmp_path):
    root = tmp_path / "vllm"
    _aot_tree(root)
    res = scan.scan(root, [_log(root, tmp_path, "k4.log"), _log(root, tmp_path, "k2.log", 2)])
    assert [e.key for e in res.shared_keys()] == list(KEYS)
    assert len(res.entries[0].specs()) == 2


def test_vllm_compile_layout(tmp_path):
    root = tmp_path / "vllm"
    for tag in ("backbone", "eagle_head"):
        d = root / "torch_compile_cache" / "0123456789" / "rank_1_0" / tag
        d.mkdir(parents=True)
        (d / "cache_key_factors.json").write_text("{}")
    log = tmp_path / "s.log"
    log.write_text(f"(Worker pid=1) INFO [backends.py:1105] [eagle_head] Using cache directory: "
                   f"{root}/torch_compile_cache/0123456789/rank_1_0/eagle_head for vLLM's "
                   "torch.compile\n")
    res = scan.scan(root, [log])
    assert [(e.layout, e.key, e.rank, e.tag) for e in res.entries] == [
        ("vllm_compile", "0123456789", 1, "backbone"), ("vllm_compile", "0123456789", 1, "eagle_head")]
    assert [u.action for u in res.entries[1].uses] == ["using"] and not res.entries[0].uses


def test_scan_is_read_only_and_cli_reports_shared_keys(tmp_path):
    root = tmp_path / "vllm"
    _aot_tree(root)
    before = sorted((p, p.stat().st_mtime, p.stat().st_size) for p in root.rglob("*"))
    a, b = _log(root, tmp_path, "k4.log"), _log(root, tmp_path, "k2.log", 2)
    proc = run_cli("cache", "scan", str(root), "--log", str(a), "--log", str(b), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["shared_keys"] == list(KEYS)
    assert sorted((p, p.stat().st_mtime, p.stat().st_size) for p in root.rglob("*")) == before
    missing = run_cli("cache", "scan", str(tmp_path / "nope"))
    assert missing.returncode != 0 and "no cache at" in missing.stderr
