"""The static pass on small sources written the way vLLM writes its models: which keys a walk
finds, how each is read, what it carries, and the tensors a ``load_weights`` skips."""

from __future__ import annotations

import textwrap
from pathlib import Path

from specdoctor.experiments.contract.reads import Cfg, Lit, Seeds, SourceIndex, Walker

MODEL = '''
from .helpers import nested, Layer

class Base:
    def __init__(self, config=None):
        config = config or vllm_config.model_config.hf_config
        self.eps = config.rms_norm_eps

class Head(Base):
    layer_cls = Layer

    def __init__(self, vllm_config, prefix=""):
        super().__init__(config=vllm_config.speculative_config.draft_model_config.hf_config)
        self.config = vllm_config.speculative_config.draft_model_config.hf_config
        eagle = getattr(self.config, "eagle_config", None) or {}
        if "use_aux" in eagle:
            self.use_aux = eagle["use_aux"]
        else:
            self.use_aux = True
        self.norm_first = bool(eagle.get("norm_first", getattr(self.config, "norm_first", False)))
        self.scale = getattr(self.config, "logit_scale", 1.0)
        ids = [i + 1 for i in (nested(self.config, "dflash_config", "layer_ids") or [])]
        self.layers = [self.layer_cls(config=self.config) for _ in range(self.config.num_layers)]
        make = lambda p: Layer(config=self.config)
        if self.config.model_type == "special":
            pass
        self.config.draft_vocab_size = self.config.vocab_size

    def load_weights(self, weights):
        mapping = {"mask_hidden": None}
        for name, w in weights:
            if "t2d" in name:
                continue
        if not self.use_aux:
            mapping["fc."] = None
        if not self.norm_first:
            mapping["input_norm."] = None
        if not found_embed:
            mapping["embed_tokens"] = None
'''

HELPERS = '''
def nested(config, section, name):
    inner = getattr(config, section, None)
    return inner.get(name)

class Layer:
    def __init__(self, config, attn_cls=None):
        self.act = config.hidden_act
        self.window = getattr(config, "sliding_window", None)
'''


def _walk(tmp_path: Path, model: str = MODEL) -> Walker:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(textwrap.dedent(model))
    (pkg / "helpers.py").write_text(textwrap.dedent(HELPERS))
    index = SourceIndex(pkg, "pkg")
    w = Walker(index, Seeds(names=("config",), chains=("draft_model_config.hf_config",)))
    mod, cls = index.find_class("pkg.model", "Head")
    w.instantiate(mod, cls)
    return w


def _by_key(w: Walker) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in w.found.reads:
        out.setdefault(r.key, []).append(r)
    return out


def test_each_way_of_reading_a_key_is_found_with_its_default(tmp_path):
    keys = _by_key(_walk(tmp_path))
    assert {r.how for r in keys["eagle_config"]} == {"getattr"}
    assert {r.how for r in keys["eagle_config.use_aux"]} == {"in", "subscript"}
    assert [r.default for r in keys["logit_scale"]] == ["1.0"]
    assert keys["eagle_config.norm_first"][0].default == \
        "getattr(self.config, 'norm_first', False)"
    assert keys["eagle_config.norm_first"][0].normalise == "bool()"
    assert keys["num_layers"][0].how == "attribute"
    assert "rms_norm_eps" in keys    # the base's __init__, through super()


def test_calls_carry_the_config_into_helpers_literals_included(tmp_path):
    keys = _by_key(_walk(tmp_path))
    # nested(self.config, "dflash_config", "layer_ids") resolves getattr(config, section)
    # and inner.get(name) with the literals bound to the helper's parameters
    (read,) = keys["dflash_config.layer_ids"]
    assert read.how == "get" and read.normalise == "each + 1"
    # a class held in a class attribute (``layer_cls``) and one built in a lambda
    assert "hidden_act" in keys and "sliding_window" in keys


def test_writes_and_selectors_are_told_apart_from_reads(tmp_path):
    keys = _by_key(_walk(tmp_path))
    assert [r.how for r in keys["draft_vocab_size"]] == ["set"]
    assert all(r.selector for r in keys["model_type"])
    assert not any(r.selector for r in keys["logit_scale"])


def test_load_weights_skips_are_tensor_rules_with_the_flag_that_decides_them(tmp_path):
    rules = {t.pattern: t for t in _walk(tmp_path).found.tensors}
    assert rules["t2d"].flag is None and not rules["t2d"].on_checkpoint
    assert rules["mask_hidden"].flag is None
    fc = rules["fc."]
    assert fc.flag == Cfg("eagle_config.use_aux", Lit(True)) and fc.keep_when is True
    norm = rules["input_norm."]
    assert norm.flag is not None and norm.flag.path == "eagle_config.norm_first"
    assert norm.flag.default == Cfg("norm_first", Lit(False))
    # decided by what the checkpoint ships, not by a config key
    assert rules["embed_tokens"].on_checkpoint and rules["embed_tokens"].flag is None


def test_a_function_no_seed_reaches_reads_nothing(tmp_path):
    model = MODEL.replace("draft_model_config", "target_model_config")
    keys = _by_key(_walk(tmp_path, model))
    assert "logit_scale" not in keys and "eagle_config" not in keys
