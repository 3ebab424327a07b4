"""`specdoctor astexec` through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recon"))
from imagebuild import metadata, wheel  # noqa: E402

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


def test_a_call_that_raises_exits_1_and_still_prints_the_result(tmp_path):
    mod = tmp_path / "mod.py"
    mod.write_text("def inv(x):\n    return 1 / x\n")
    r = run(str(mod), "inv", "--call", "inv(2)", "--call", "inv(0)", "--json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["raised"] == 1 and out["calls"][0]["value"] == 0.5
    assert out["calls"][1]["error"]["type"] == "ZeroDivisionError"
    assert "1 of the calls or definitions raised" in r.stderr and "Traceback" not in r.stderr
    assert run(str(mod), "inv", "--call", "inv(4)").returncode == 0


def test_config_without_dash_dash_config_is_refused(tmp_path):
    mod = tmp_path / "mod.py"
    mod.write_text("def layers(config):\n    return config.num_hidden_layers\n")
    r = run(str(mod), "layers", "--call", "layers(config)")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "uses `config`, but no --config was given" in r.stderr and "add --config" in r.stderr
    # a module that defines its own `config` needs no --config
    mod.write_text("config = 3\n\n\ndef layers():\n    return config\n")
    r = run(str(mod), "layers", "--call", "layers() + config", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["calls"][0]["value"] == 6


@pytest.mark.parametrize("content, needle", [
    (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), "is a binary file"),
    (b"def f():\n    return 'caf\xe9'\n", "is not valid utf-8 text (byte 24"),
    (b"\xff\xfe\x80garbage\n", "is not Python source text"),
])
def test_binary_and_non_utf8_files_are_one_line_errors(tmp_path, content, needle):
    mod = tmp_path / "engine.py"
    mod.write_bytes(content)
    r = run(str(mod), "f", "--call", "f()")
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_a_declared_encoding_is_honoured(tmp_path):
    mod = tmp_path / "engine.py"
    mod.write_bytes(b"# -*- coding: latin-1 -*-\ndef f():\n    return 'caf\xe9'\n")
    r = run(str(mod), "f", "--call", "f()", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["calls"][0]["value"] == "caf\u00e9"


def test_provenance_of_a_snapshot_file_as_it_is_now(tmp_path):
    rel = "vllm/v1/spec_decode/eagle.py"
    wheel(tmp_path / "vllm-0.10.0-py3-none-any.whl",
          {rel: b"def propose(k):\n    return k\n",
           "vllm-0.10.0.dist-info/METADATA": metadata("vllm", "0.10.0")})
    snap = tmp_path / "snap"
    assert subprocess.run([sys.executable, "-m", "specdoctor", "recon", "extract",
                           str(tmp_path / "vllm-0.10.0-py3-none-any.whl"), "-o", str(snap)],
                          capture_output=True).returncode == 0
    r = run(str(snap / rel), "propose", "--call", "propose(3)", "--json")
    p = json.loads(r.stdout)["provenance"]
    assert (p["kind"], p["status"], p["packages"]) == ("snapshot", "as recorded", ["vllm 0.10.0"])
    (snap / rel).write_bytes(b"def propose(k):\n    return k + 1\n")  # edited after extraction
    r = run(str(snap / rel), "propose", "--call", "propose(3)", "--json")
    out = json.loads(r.stdout)
    assert out["calls"][0]["value"] == 4  # what ran is the file as it is now ...
    p = out["provenance"]
    assert p["status"] == "edited after extraction"  # ... and the report says it is not the image's
    assert p["sha256"] != p["recorded_sha256"] and p["sha256"] == out["file_sha256"]
    table = run(str(snap / rel), "propose", "--call", "propose(3)").stdout
    assert "edited after extraction" in table and "vllm 0.10.0" in table


def test_provenance_of_an_installed_module_checks_its_record():
    pytest.importorskip("click")
    r = run("click.utils", "make_str", "--call", "make_str(b'x')", "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)["provenance"]
    assert p["kind"] == "installed" and p["distribution"].lower() == "click"
    assert p["status"] == "as recorded" and p["recorded_sha256"] == p["sha256"]
