"""astexec runs untrusted code: isolation, limits, and one clear message per bad input."""

from __future__ import annotations

import textwrap

import pytest

from specdoctor.errors import InputError
from specdoctor.experiments.astexec.cut import cut_definitions
from specdoctor.experiments.astexec.run import astexec
from specdoctor.experiments.astexec.sandbox import SandboxLimits

HOSTILE = '''
import os
import socket
import subprocess
import time

from engine.thing import Helper


def read_env():
    return os.environ.get("SPECDOCTOR_TEST_SECRET"), sorted(os.environ)


def connect():
    socket.create_connection(("1.1.1.1", 53), timeout=2)


def spawn():
    return subprocess.run(["true"]).returncode


def spin():
    while True:
        pass


def hog():
    return len(bytearray(2 << 30))


def uses_helper() -> Helper:
    return Helper.make(3)
'''


@pytest.fixture
def hostile(tmp_path):
    f = tmp_path / "hostile.py"
    f.write_text(HOSTILE)
    return f


def test_environment_is_not_inherited(hostile, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_TEST_SECRET", "token-123")
    out = astexec(str(hostile), ["read_env"], calls=["read_env()"])
    secret, names = out["calls"][0]["value"]
    assert secret is None
    assert "SPECDOCTOR_TEST_SECRET" not in names


def test_network_and_subprocesses_are_refused(hostile):
    out = astexec(str(hostile), ["connect", "spawn"], calls=["connect()", "spawn()"])
    for call in out["calls"]:
        assert "error" in call, call
        assert call["error"]["type"] in ("PermissionError", "OSError")
    assert out["isolation"]["network"] in ("netns", "userns+netns", "audit-hook")


def test_time_limit_kills_the_run(hostile):
    with pytest.raises(InputError, match="limit"):
        astexec(str(hostile), ["spin"], calls=["spin()"], limits=SandboxLimits(timeout_s=2))


def test_memory_limit(hostile):
    out = astexec(str(hostile), ["hog"], calls=["hog()"], limits=SandboxLimits(memory_mb=512))
    assert out["calls"][0]["error"]["type"] == "MemoryError"


def test_imported_names_become_recorded_stubs(hostile):
    out = astexec(str(hostile), ["uses_helper"], calls=["uses_helper()"])
    assert out["calls"][0]["value"] == {"stub": "Helper.make()"}
    uses = out["stubs"]["Helper"]["uses"]
    assert [u["op"] for u in uses] == ["attr", "call"]
    assert out["stubs"]["Helper"]["loaded_at_def"] is True  # the return annotation
    # stdlib imports are real: os, socket, subprocess, time are not stubs
    assert set(out["stubs"]) == {"Helper"}


def test_future_annotations_are_not_evaluated(tmp_path):
    f = tmp_path / "lazy.py"
    f.write_text("from __future__ import annotations\nfrom x import T\n\n"
                 "def f(a: T) -> T:\n    return a\n")
    out = astexec(str(f), ["f"], calls=["f(2)"])
    assert out["future_annotations"] is True
    assert out["stubs"]["T"]["loaded_at_def"] is False
    assert out["calls"][0]["value"] == 2


def test_stubbed_decorators_keep_the_function(tmp_path):
    f = tmp_path / "deco.py"
    f.write_text(textwrap.dedent('''
        from engine import support_torch_compile, cache_it

        @cache_it
        def double(x):
            return 2 * x

        @support_torch_compile(dynamic_arg_dims={"x": 0})
        class Model:
            def forward(self, x):
                return double(x)
    '''))
    out = astexec(str(f), ["Model"], calls=["Model().forward(4)"])
    assert out["calls"][0]["value"] == 8
    assert [u["op"] for u in out["stubs"]["cache_it"]["uses"]] == ["decorate"]
    ops = [u["op"] for u in out["stubs"]["support_torch_compile"]["uses"]]
    assert ops == ["call", "decorate"]


def test_bad_inputs_each_get_one_message(tmp_path, hostile):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    pass\n")
    with pytest.raises(InputError, match="syntax error at line 1"):
        astexec(str(broken), ["f"])
    with pytest.raises(InputError, match="no function or class 'nope'"):
        astexec(str(hostile), ["nope"])
    with pytest.raises(InputError, match="no class 'read_env'"):
        astexec(str(hostile), ["read_env.method"])
    with pytest.raises(InputError, match="does not use os"):
        astexec(str(hostile), ["read_env"], stubs=["os=raise"])
    with pytest.raises(InputError, match="NAME=raise"):
        astexec(str(hostile), ["read_env"], stubs=["justaname"])
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="cannot read .* as JSON"):
        astexec(str(hostile), ["read_env"], config_path=bad)
    with pytest.raises(InputError, match="no module file"):
        astexec("json.no_such_module", ["f"])


def test_method_lines_keep_their_numbers(tmp_path):
    f = tmp_path / "cls.py"
    f.write_text("class A:\n    x = 1\n\n    def a(self):\n        return 1\n\n"
                 "    def b(self):\n        raise ValueError('here')\n")
    cut = cut_definitions(f, ["A.b"])
    assert "def a" not in cut.segments[0].text
    out = astexec(str(f), ["A.b"], calls=["A().b()"])
    assert out["calls"][0]["error"]["at"]["line"] == 8


def test_module_bindings_shadow_builtins(tmp_path):
    f = tmp_path / "shadow.py"
    f.write_text("def len(x):\n    return -1\n\n\ndef size(x):\n    return len(x)\n")
    out = astexec(str(f), ["size"], calls=["size([1, 2])"])
    assert out["calls"][0]["value"] == -1
    assert [d["name"] for d in out["definitions"]] == ["len", "size"]
