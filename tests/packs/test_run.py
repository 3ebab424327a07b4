"""A pack turned on in a launch: where it goes on the launch's PYTHONPATH, and its gate."""

from __future__ import annotations

import os

from specdoctor.launch import LaunchSpec
from specdoctor.packs import run as packs


def test_a_pack_goes_first_or_after_the_launchs_own_pythonpath(tmp_path):
    pack, _ = packs.prepare("startup", tmp_path / "run")
    launch = LaunchSpec(("vllm", "serve", "m"), {"PYTHONPATH": "/user/patch", "A": "1"})
    first = packs.with_pack(launch, pack)
    assert first.env["PYTHONPATH"].split(os.pathsep) == [str(pack.dir), "/user/patch"]
    after = packs.with_pack(launch, pack, after=True)
    assert after.env["PYTHONPATH"].split(os.pathsep) == ["/user/patch", str(pack.dir)]
    for out in (first, after):
        assert out.env[pack.gate] == "1" and out.env["A"] == "1" and out.argv == launch.argv
    assert launch.env == {"PYTHONPATH": "/user/patch", "A": "1"}   # not changed in place
