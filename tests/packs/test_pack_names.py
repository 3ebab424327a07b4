"""A pack's name comes from a file the user was handed: it never becomes a path outside the
store, and nothing of the spec becomes code in the generated ``sitecustomize.py``."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.packs import build, spec

BODY = '''
[pack]
name = {name}
gate = "T_PROBES"

[[probe]]
name = "add"
target = "fakelib.add"
log = ["a"]
'''


def _write(tmp: Path, name: str, stem: str = "spec") -> Path:
    p = tmp / f"{stem}.toml"
    p.write_text(BODY.format(name=json.dumps(name)))  # a TOML basic string is a JSON string
    return p


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specdoctor", *args], capture_output=True,
                          text=True, timeout=120, cwd=home,
                          env={**os.environ, "SPECDOCTOR_HOME": str(home / "store")})


def test_probe_run_refuses_a_pack_name_that_leaves_the_store(tmp_path):
    store = tmp_path / "store"
    r = _cli("probe", "run", str(_write(tmp_path, "x/../../../escaped")), "--", "true",
             home=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "'x/../../../escaped'" in r.stderr and "letters, digits" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    outside = [p for p in tmp_path.rglob("*") if store not in p.parents and p != store
               and p.suffix != ".toml"]
    assert outside == [], outside


@pytest.mark.parametrize("name", ["/etc/cron.d/x", "a/b", "..", ".hidden", "a.b", "a b",
                                  "tab\there", "esc\x1b[2J", "é", "x" * 65, 'q"""q'])
def test_unsafe_pack_names_are_refused_naming_the_rule(tmp_path, name):
    with pytest.raises(InputError, match="letters, digits") as err:
        spec.load(_write(tmp_path, name))
    assert repr(name) in err.value.problem


def test_a_spec_file_named_unsafely_needs_a_name(tmp_path):
    p = tmp_path / "spec.toml"
    p.write_text(BODY.replace("name = {name}\n", ""))
    bad = p.rename(tmp_path / "a b.toml")
    with pytest.raises(InputError, match="letters, digits"):
        spec.load(bad)


def test_safe_names_pass():
    for name in ("startup", "cpu-sampler-fix", "draft_trace2", "0123456789abcdef", "x" * 64):
        assert spec.safe_name(name, "here") == name


def test_generated_code_holds_no_text_of_the_spec(tmp_path):
    """A name (or a gate, a target) that is code in a Python string is inert: the
    sitecustomize is the same bytes for every pack, the spec is data in pack.json."""
    hostile = BODY.format(name='"ok"').replace(
        'target = "fakelib.add"', 'target = "fakelib.add"\nhandler = "h.py:rows"')
    (tmp_path / "h.py").write_text("def rows(call):\n    return []\n")
    (tmp_path / "spec.toml").write_text(hostile)
    first = build.build(spec.load(tmp_path / "spec.toml"), tmp_path / "a")
    other = dataclasses.replace(spec.load(tmp_path / "spec.toml"), name="other-name",
                                gate="OTHER_GATE", sink_env="OTHER_SINK")
    second = build.build(other, tmp_path / "b")
    code = (first.dir / "sitecustomize.py").read_text()
    assert code == (second.dir / "sitecustomize.py").read_text()
    for text in ("ok", "T_PROBES", "fakelib", "h.py", "other-name", "OTHER_GATE"):
        assert text not in code, text
    assert json.loads((second.dir / "pack.json").read_text())["gate"] == "OTHER_GATE"


def test_a_name_holding_triple_quotes_runs_no_code(tmp_path):
    """Built around the parser (a PackSpec made in code, as the lab does): still no code runs."""
    marker = tmp_path / "pwned"
    name = f'x"""\nopen({str(marker)!r}, "w").write("1")\n"""'
    probes = (spec.Probe("add", "fakelib.add", log=("a",)),)
    with pytest.raises(InputError, match="letters, digits"):
        build.build(spec.PackSpec(name, probes, gate="T_PROBES"), tmp_path / "p")
    # and were a pack.json edited by hand to hold it, the code only reads it as data
    pack = build.build(spec.PackSpec("t", probes, gate="T_PROBES"), tmp_path / "q")
    cfg = json.loads((pack.dir / "pack.json").read_text())
    (pack.dir / "pack.json").write_text(json.dumps({**cfg, "name": name}))
    proc = subprocess.run([sys.executable, "-c", "print('started')"], capture_output=True,
                          text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(pack.dir), "T_PROBES": "1"})
    assert proc.returncode == 0 and "started" in proc.stdout, proc.stderr
    assert not marker.exists()
