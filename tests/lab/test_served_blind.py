"""The lab never tells the answer: nothing a server is given or logs names a fault.

For every fault of the catalogue, the launch recipe (argv, environment, label) and every file of
every directory the server reads (names and contents) are searched for the fault id, the
patched directory's lab name and the lab's build records; and the fault must still be in the
served bytes (a clean directory that lost the fault would pass the search trivially). Built on
the hand-wired controls: no training, no server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from specdoctor.lab import drafters, faults  # noqa: E402
from specdoctor.lab import lab as labmod  # noqa: E402
from specdoctor.lab.drafters import cache  # noqa: E402

CONTROL = {"eagle3": "pos0", "dflash": "pos0", "mtp": "pos0"}


def served_dirs(spec) -> list[Path]:
    argv = list(spec.argv)
    dirs = [Path(argv[argv.index(flag) + 1]) for flag in ("--model", "--tokenizer") if flag in argv]
    model = json.loads(argv[argv.index("--speculative-config") + 1]).get("model")
    return dirs + ([Path(model)] if model else [])


def patch_dirs(spec) -> list[Path]:
    """Directories the lab put on the server's PYTHONPATH (a fault's runtime patch)."""
    entries = spec.env.get("PYTHONPATH", "").split(":")
    return [Path(e) for e in entries if e and (Path(e) / "sitecustomize.py").is_file()]


def what_the_engine_sees(spec, dirs: list[Path] | None = None) -> str:
    """Every string the server is given or can read: argv, env (names and values), label, and
    each served or patch directory's path, file names and file contents (binary files as
    latin-1)."""
    parts = [*spec.argv, *spec.env, *spec.env.values(), spec.label, spec.shell_command()]
    for d in served_dirs(spec) if dirs is None else dirs:
        for f in sorted(d.iterdir()):
            parts += [str(f), f.read_bytes().decode("latin-1")]
    return "\n".join(parts)


@pytest.mark.parametrize("fault_id", list(faults.FAULTS))
def test_nothing_a_server_reads_names_its_fault(fault_id):
    f = faults.get(fault_id)
    spec = labmod.lab_spec(f.method, None, 18765, control=CONTROL.get(f.method), fault=fault_id)
    seen = what_the_engine_sees(spec)
    for word in (fault_id, f.root_cause, "-patched", cache.DONE, cache.LAB_PREFIX + "_"):
        assert word not in seen, f"{word!r} is visible to the engine for {fault_id}"
    patched = what_the_engine_sees(spec, patch_dirs(spec))  # its runtime is the probes' own
    for word in (fault_id, f.root_cause):
        assert word not in patched, f"{word!r} is in the runtime patch of {fault_id}"
    for d in served_dirs(spec):
        assert d.parent.name == "served" and len(d.name) == 16, d
        assert not any(p.name.startswith(cache.LAB_PREFIX) for p in d.iterdir()), d
        cfg = json.loads((d / "config.json").read_text())
        assert not [k for k in cfg if k.startswith(cache.LAB_PREFIX)], d


@pytest.mark.parametrize("fault_id", [f.id for f in faults.FAULTS.values()
                                      if f.config or f.config_edit or f.tensor_edit])
def test_the_served_copy_still_carries_the_fault(fault_id):
    f = faults.get(fault_id)
    healthy = labmod.lab_spec(f.method, None, 18765, control=CONTROL[f.method])
    sick = labmod.lab_spec(f.method, None, 18765, control=CONTROL[f.method], fault=fault_id)
    h, s = served_dirs(healthy), served_dirs(sick)
    assert h[:2] == s[:2]  # same target and tokenizer
    assert h[2] != s[2]  # another drafter, by content
    cfg_h, cfg_s = (json.loads((d[2] / "config.json").read_text()) for d in (h, s))
    tensors_differ = (d[2] / "model.safetensors" for d in (h, s))
    assert cfg_h != cfg_s or len({p.read_bytes() for p in tensors_differ}) == 2


def test_published_strips_the_labs_records_and_keys_and_names_by_content(tmp_path):
    src = tmp_path / "mimo-mtp-trained-0123456789ab"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"model_type": "qwen2",
                                                 "specdoctor_mtp_trained_steps": 1}))
    (src / "model.safetensors").write_bytes(b"weights")
    (src / cache.DONE).write_text(json.dumps({"recipe": {"fault": "x"}}))
    out = cache.published(src)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    assert json.loads((out / "config.json").read_text()) == {"model_type": "qwen2"}
    assert (out / "model.safetensors").read_bytes() == b"weights"
    assert cache.published(src) == out  # built once
    (src / "model.safetensors").write_bytes(b"other weights")
    assert cache.published(src) != out  # named by content, not by source


def test_a_fault_leaves_no_trace_in_the_served_k_beyond_training_setup():
    """The k fault serves the healthy layer at another k: only k differs on the command line."""
    healthy = labmod.lab_spec("mtp", 6, 18765, control="pos0")
    sick = labmod.lab_spec("mtp", None, 18765, control="pos0", fault="mtp-k-beyond-training")
    assert sick.argv == healthy.argv and sick.label == healthy.label
    assert faults.serve("mtp", control="pos0", fault="mtp-k-beyond-training").fault == \
        "mtp-k-beyond-training"  # the lab itself still knows


def test_a_runtime_patch_is_on_the_path_named_by_content_and_its_lines_go_to_the_lab():
    """draft-heads-lost changes no file the server reads: its patch pack is on PYTHONPATH, in a
    directory named by content hash, and its one line goes to a file of the lab, not the log."""
    from specdoctor.lab import patches

    healthy = labmod.lab_spec("draft_model", None, 18765)
    sick = labmod.lab_spec("draft_model", None, 18765, fault="draft-heads-lost")
    assert sick.argv == healthy.argv and sick.label == healthy.label
    (d,) = patch_dirs(sick)
    assert not patch_dirs(healthy)
    digest = patches.content_hash("attn-shard")
    assert d.parent.name == digest and len(digest) == 16
    config = json.loads((d / "pack.json").read_text())
    assert config["name"] == digest and {p["name"] for p in config["probes"]} == {digest}
    # the patch is really on: it learns the draft's layers from the proposer, then edits them
    assert [p.get("handler") or p.get("replace") for p in config["probes"]] == \
        ["attn_shard.py:proposer_loaded", "attn_shard.py:forward"]
    sink = Path(sick.env[config["sink_env"]])
    assert sink.parent == d.parent  # the lab's file, not the server's log
