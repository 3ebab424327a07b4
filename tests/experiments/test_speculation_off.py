"""speculation-off's relaunches: the launch with one speculative setting changed at a time
(pure), engine by engine. The live run is in tests/lab/test_llamacpp_live.py."""

from __future__ import annotations

import json
import shlex

from specdoctor.experiments.speculation_off import variants
from specdoctor.launch.spec import parse_command


def _variants(cmd: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(v.change, v.launch.argv) for v in variants(parse_command(shlex.split(cmd)))]


def test_llama_server_without_a_draft_type_is_relaunched_with_one_first() -> None:
    got = _variants("llama-server -m t.gguf -md d.gguf --spec-draft-n-max 4 "
                    "--spec-draft-n-min 8 --spec-draft-threads 1 --port 9")
    changes = [c.split(" (")[0] for c, _ in got]
    assert changes == ["--spec-type draft-simple", "without --spec-draft-n-min 8"]
    first = got[0][1]
    assert first[first.index("--spec-type") + 1] == "draft-simple"
    # the drafter, k and where it runs are never what is dropped
    assert all("-md" in argv and "--spec-draft-n-max" in argv and "--spec-draft-threads" in argv
               for _, argv in got)


def test_a_draft_type_beside_another_type_is_added_to_the_list() -> None:
    got = _variants("llama-server -m t.gguf -md d.gguf --spec-type ngram-mod")
    argv = got[0][1]
    assert argv[argv.index("--spec-type") + 1] == "ngram-mod,draft-simple"
    assert _variants("llama-server -m t.gguf -md d.gguf --spec-type draft-simple") == []


def test_vllm_drops_each_speculative_key_but_method_drafter_and_k() -> None:
    cfg = {"method": "draft_model", "model": "d", "num_speculative_tokens": 4,
           "disable_by_batch_size": 1}
    got = _variants(f"vllm serve m --speculative-config '{json.dumps(cfg)}'")
    assert len(got) == 1 and got[0][0].startswith("without disable_by_batch_size=1")
    argv = got[0][1]
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": "draft_model", "model": "d", "num_speculative_tokens": 4}
