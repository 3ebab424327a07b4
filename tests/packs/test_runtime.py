"""Probe packs in real Python processes, without vLLM: a pack built from a spec, put on
PYTHONPATH of a child interpreter, wraps functions of a module imported later, logs one line per
call, returns the original values, survives every failure, and chains a user's sitecustomize."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from specdoctor.errors import InputError
from specdoctor.packs import build, run, shipped, spec

MODULE = '''
import functools

CALLS = []

def add(a, b=1):
    return a + b

def fails(x):
    raise ValueError("original error " + str(x))

class Box:
    def __init__(self, size):
        self.size = size

    def grow(self, by):
        self.size += by
        return self.size

    @staticmethod
    def twice(x):
        return 2 * x

    @classmethod
    def make(cls, size):
        return cls(size)

SAME_MODULE = {"add": add}  # captured while the module runs: keeps the original (documented)
'''

# a registry in another module, filled at its import time (vLLM's CPU kernel table is one)
REGISTRY = '''
from fakelib import add
REGISTRY = {"add": add}
'''

USER = '''
import fakelib
import fakereg
from fakelib import add, Box

assert add(2, 3) == 5, add(2, 3)
assert fakereg.REGISTRY["add"](1) == 2
assert fakelib.SAME_MODULE["add"](10) == 11
b = Box.make(3)
assert b.grow(4) == 7
assert Box.twice(5) == 10
try:
    fakelib.fails(9)
except ValueError as exc:
    assert str(exc) == "original error 9"
else:
    raise SystemExit("the original exception was swallowed")
print("USER-OK")
'''


def _spec(tmp: Path, body: str) -> Path:
    p = tmp / "spec.toml"
    p.write_text(textwrap.dedent(body))
    return p


def _child(tmp: Path, pack_dir: Path | None, env: dict[str, str], extra_path: str = ""):
    lib = tmp / "lib"
    lib.mkdir(exist_ok=True)
    (lib / "fakelib.py").write_text(MODULE)
    (lib / "fakereg.py").write_text(REGISTRY)
    path = [str(pack_dir)] if pack_dir else []
    path += [str(lib)] + ([extra_path] if extra_path else [])
    return subprocess.run([sys.executable, "-c", USER], check=False, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(path), **env},
                          timeout=60)


GOOD = '''
[pack]
name = "t"
gate = "T_PROBES"

[[probe]]
name = "add"
target = "fakelib.add"
log = ["a", "b", "sum=result"]

[[probe]]
name = "grow"
target = "fakelib:Box.grow"
log = ["before=by", "size=self.size", "result"]

[[probe]]
name = "twice"
target = "fakelib.Box.twice"
log = ["arg0", "result"]

[[probe]]
name = "make"
target = "fakelib.Box.make"
log = ["size"]

[[probe]]
name = "fails"
target = "fakelib.fails"
log = ["x"]
'''


def test_pack_wraps_later_imports_and_returns_original_values(tmp_path):
    pack = build.build(spec.load(_spec(tmp_path, GOOD)), tmp_path / "pack")
    proc = _child(tmp_path, pack.dir, {"T_PROBES": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "USER-OK" in proc.stdout
    lines = run.collect(proc.stderr)
    got = {(ln.probe, json.dumps(ln.data, sort_keys=True)) for ln in lines}
    assert ("add", json.dumps({"a": 2, "b": 3, "sum": 5}, sort_keys=True)) in got
    # a registry filled at another module's import time holds the wrapped function too
    assert ("add", json.dumps({"a": 1, "b": 1, "sum": 2}, sort_keys=True)) in got
    # a reference taken inside the target's own module, while it ran, is not wrapped
    assert ("add", json.dumps({"a": 10, "b": 1, "sum": 11}, sort_keys=True)) not in got
    assert [ln.data for ln in lines if ln.probe == "grow"] == [
        {"before": 4, "size": 7, "result": 7}]
    assert [ln.data for ln in lines if ln.probe == "twice"] == [{"arg0": 5, "result": 10}]
    assert [ln.data for ln in lines if ln.probe == "make"] == [{"size": 3}]
    fails = [ln.data for ln in lines if ln.probe == "fails"]
    assert fails == [{"x": 9, "raised": "ValueError('original error 9')"}]


def test_gate_off_means_no_probe_at_all(tmp_path):
    pack = build.build(spec.load(_spec(tmp_path, GOOD)), tmp_path / "pack")
    proc = _child(tmp_path, pack.dir, {})
    assert proc.returncode == 0 and "USER-OK" in proc.stdout
    assert "[probe]" not in proc.stderr


FAILING = '''
[pack]
name = "bad"

[[probe]]
name = "missing"
target = "fakelib.no_such_function"
log = ["result"]

[[probe]]
name = "missing-module"
target = "fakelib_absent:f"
log = ["result"]

[[probe]]
name = "bad-expr"
target = "fakelib.add"
log = ["a.nope", "arg9", "ghost", "result[2]"]

[[probe]]
name = "handler"
target = "fakelib.Box.grow"
handler = "h.py:boom"

[[probe]]
name = "unprintable"
target = "fakelib.Box.twice"
handler = "h.py:ugly"
'''

HANDLERS = '''
class Ugly:
    def __repr__(self):
        raise RuntimeError("no repr")

def boom(call):
    raise RuntimeError("handler raised")

def ugly(call):
    return [{"v": Ugly()}, Ugly()]
'''


def test_every_failure_is_logged_once_and_the_program_is_unaffected(tmp_path):
    (tmp_path / "h.py").write_text(HANDLERS)
    pack = build.build(spec.load(_spec(tmp_path, FAILING)), tmp_path / "pack")
    proc = _child(tmp_path, pack.dir, {"SPECDOCTOR_PROBES": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "USER-OK" in proc.stdout
    lines = run.collect(proc.stderr)
    by = {}
    for ln in lines:
        by.setdefault(ln.probe, []).append(ln.data)
    assert by["missing"] == [{"error": "target not found: fakelib.no_such_function "
                                       "(fakelib has no no_such_function)"}]
    assert "missing-module" not in by  # its module is never imported: nothing to say
    first = by["bad-expr"][0]
    assert set(first) == {"a.nope", "arg9", "ghost", "result[2]"}
    assert all("error" in v for v in first.values())
    assert len(by["handler"]) == 1 and "handler raised" in by["handler"][0]["error"]
    assert by["unprintable"][:2] == [{"v": "<unprintable Ugly>"}, {"value": "<unprintable Ugly>"}]


def test_an_existing_sitecustomize_still_runs(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text(
        "import sys\nsys.stderr.write('USER-SITECUSTOMIZE\\n')\n")
    pack = build.build(spec.load(_spec(tmp_path, GOOD)), tmp_path / "pack")
    for env in ({"T_PROBES": "1"}, {}):
        proc = _child(tmp_path, pack.dir, env, extra_path=str(user))
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.count("USER-SITECUSTOMIZE") == 1


def test_two_packs_stack(tmp_path):
    a = build.build(spec.load(_spec(tmp_path, GOOD)), tmp_path / "a")
    other = GOOD.replace('name = "t"', 'name = "u"').replace('"add"', '"add2"', 1)
    (tmp_path / "o").mkdir()
    b = build.build(spec.load(_spec(tmp_path / "o", other)), tmp_path / "b")
    proc = _child(tmp_path, a.dir, {"T_PROBES": "1"}, extra_path=str(b.dir))
    assert proc.returncode == 0, proc.stderr
    names = {ln.probe for ln in run.collect(proc.stderr)}
    assert {"add", "add2"} <= names
    # each call is logged by both wrappers, the value still returned once, unchanged
    assert "USER-OK" in proc.stdout


def test_run_command_stores_the_lines(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "fakelib.py").write_text(MODULE)
    (tmp_path / "lib" / "fakereg.py").write_text(REGISTRY)
    s = _spec(tmp_path, GOOD.replace('gate = "T_PROBES"', ""))
    env_before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tmp_path / "lib")
    try:
        r = run.run_command(s, [sys.executable, "-c", USER], run_dir=tmp_path / "run",
                            echo=False)
    finally:
        if env_before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = env_before
    assert r.returncode == 0
    assert r.by_probe("twice") == [{"arg0": 5, "result": 10}]
    stored = [json.loads(x) for x in (tmp_path / "run" / "lines.jsonl").read_text().splitlines()]
    assert {"probe": "twice", "data": {"arg0": 5, "result": 10}} in stored


@pytest.mark.parametrize("body, problem", [
    ("[[probe]]\ntarget = 'nodots'\nlog = ['x']\n", "not a dotted path"),
    ("[[probe]]\ntarget = 'a.b'\n", "nothing to log"),
    ("[[probe]]\ntarget = 'a.b'\nlog = ['x']\nwhen = 'during'\n", "when"),
    ("[[probe]]\ntarget = 'a.b'\nlog = ['x + 1']\n", "expressions"),
    ("[[probe]]\ntarget = 'a.b'\nlog = ['x']\nlimt = 3\n", "unknown keys"),
    ("[[probe]]\ntarget = 'a.b'\nhandler = 'missing.py:f'\n", "does not exist"),
    ("[pack]\nname = 'x'\n", "no [[probe]]"),
    ("[[probe\n", "cannot read"),
])
def test_bad_specs_are_refused_with_the_fix(tmp_path, body, problem):
    with pytest.raises(InputError, match=problem.replace("[", r"\[").replace("+", r"\+")):
        spec.load(_spec(tmp_path, body))


def test_build_refuses_a_directory_that_is_not_a_pack(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "precious.txt").write_text("keep me")
    with pytest.raises(InputError, match="not empty"):
        build.build(spec.load(_spec(tmp_path, GOOD)), tmp_path / "out")
    assert (tmp_path / "out" / "precious.txt").read_text() == "keep me"


def test_shipped_packs_parse():
    names = shipped.available()
    assert {"startup", "dflash", "raise-everywhere"} <= set(names)
    for p in names.values():
        assert spec.load(p).probes


def test_a_pack_whose_runtime_is_missing_says_so_and_stays_out_of_the_way(tmp_path):
    pack = build.build(spec.load(_spec(tmp_path, GOOD)), tmp_path / "pack",
                       runtime="no_such_runtime.py")
    proc = _child(tmp_path, pack.dir, {"T_PROBES": "1"})
    assert proc.returncode == 0 and "USER-OK" in proc.stdout, proc.stderr
    lines = run.collect(proc.stderr)
    assert [ln.probe for ln in lines] == ["t"]
    assert lines[0].data["error"].startswith("pack not installed")
