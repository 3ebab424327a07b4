"""`specdoctor astexec` through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FIX = Path(__file__).resolve().parents[1] / "experiments" / "astexec" / "fixtures"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specdoctor", "astexec", *args],
                          capture_output=True, text=True, timeout=120)


def test_json_and_table_output(tmp_path):
    mod = tmp_path / "mod.py"
    mod.write_text("from engine import Cfg\n\nLIMIT = 3\n\n\n"
                   "def pick(config: Cfg) -> list:\n"
                   "    return [i for i in config.dflash_config['target_layer_ids'] if i < LIMIT * 10]\n")
    r = run(str(mod), "pick", "--config", str(FIX / "dflash_qwen3_8b_b16.json"),
            "--call", "pick(config)", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    ids = json.loads((FIX / "dflash_qwen3_8b_b16.json").read_text())["dflash_config"]["target_layer_ids"]
    assert out["calls"][0]["value"] == [i for i in ids if i < 30]
    assert [d["name"] for d in out["definitions"]] == ["LIMIT", "pick"]
    r = run(str(mod), "pick", "--call", "pick(SimpleNamespace(dflash_config={'target_layer_ids': [1, 40]}))")
    assert r.returncode == 0 and "[1]" in r.stdout and "Cfg" in r.stdout


def test_missing_function_is_one_line(tmp_path):
    mod = tmp_path / "mod.py"
    mod.write_text("def a():\n    pass\n")
    r = run(str(mod), "b")
    assert r.returncode == 2
    assert r.stderr.startswith("error: no function or class 'b'") and r.stderr.count("\n") == 1
