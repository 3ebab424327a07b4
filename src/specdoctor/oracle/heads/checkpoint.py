"""Reading a drafter checkpoint as vLLM serves it: config keys, tensors, and the checks first.

Every key is read from the checkpoint's own ``config.json`` (never from anything a lab or a
launcher wrote beside it). A key the oracle needs and cannot find, or a key set to a feature the
oracle does not compute, is refused with its name and the vLLM version whose reading the oracle
follows; a drafter whose widths or vocabulary do not fit the target is refused with both values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specdoctor.errors import InputError
from specdoctor.oracle.heads.conventions import VLLM_VERSION

if TYPE_CHECKING:
    import torch


def read_config(model_dir: Path) -> dict[str, Any]:
    from specdoctor.served_files import read_config as read

    return read(model_dir)


def need(cfg: dict[str, Any], key: str, what: str, where: str) -> Any:
    """``cfg[key]``, or a refusal naming the key, the drafter kind and vLLM's reader."""
    if key not in cfg or cfg[key] is None:
        raise InputError(
            f"the {what} config has no {key!r}",
            f"vLLM {VLLM_VERSION} reads it in {where}; add it to the checkpoint's config.json")
    return cfg[key]


def refuse_unsupported(cfg: dict[str, Any], what: str, keys: dict[str, Any]) -> None:
    """Keys whose non-default value names a feature the oracle does not compute."""
    for key, default in keys.items():
        value = cfg.get(key, default)
        if value != default:
            raise InputError(
                f"the {what} config sets {key}={value!r}, which the oracle does not compute "
                f"(it follows vLLM {VLLM_VERSION} with {key}={default!r})",
                "open an issue with the checkpoint's config.json")


def load_tensors(model_dir: Path, prefix: str | None = None) -> dict[str, torch.Tensor]:
    """Every tensor of the directory's safetensors files (only those under ``prefix``)."""
    from safetensors import safe_open

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise InputError(f"{model_dir} has no *.safetensors weights",
                         "the oracle loads safetensors checkpoints; convert with save_pretrained")
    from specdoctor.served_files import safetensors_header

    out: dict[str, torch.Tensor] = {}
    for f in files:
        safetensors_header(f)  # a garbage header is refused before safetensors reads it
        try:
            with safe_open(str(f), framework="pt") as fh:
                for name in fh.keys():
                    if prefix is None or name.startswith(prefix):
                        out[name] = fh.get_tensor(name)
        except Exception as exc:  # noqa: BLE001 - safetensors' own error names what is wrong
            raise InputError(f"cannot read the tensors of {f}: {type(exc).__name__}: {exc}",
                             "re-save the weights with save_pretrained") from exc
    return out


@dataclass(frozen=True)
class TargetSpec:
    """What a drafter must agree with: the target's widths and vocabulary."""

    hidden: int
    vocab: int
    layers: int

    @classmethod
    def of(cls, cfg: dict[str, Any]) -> TargetSpec:
        text = cfg.get("text_config") or cfg
        return cls(int(need(text, "hidden_size", "target", "the model config")),
                   int(need(text, "vocab_size", "target", "the model config")),
                   int(need(text, "num_hidden_layers", "target", "the model config")))


def check_width(what: str, got: int, target: TargetSpec, key: str = "hidden size") -> None:
    if got != target.hidden:
        raise InputError(f"the drafter's {key} is {got}, the target's hidden size is "
                         f"{target.hidden}: the drafter was built for another target",
                         "pass the target the drafter was trained for")


def check_vocab(what: str, got: int, target: TargetSpec) -> None:
    if got != target.vocab:
        raise InputError(f"the {what}'s vocab_size is {got}, the target's is {target.vocab}: "
                         "token ids would mean other tokens",
                         "pass the target the drafter was trained for")


def check_shape(name: str, t: torch.Tensor, shape: tuple[int, ...]) -> None:
    if tuple(t.shape) != shape:
        raise InputError(f"tensor {name} has shape {tuple(t.shape)}, the config implies {shape}",
                         "the checkpoint's config.json does not describe its weights")


def take(tensors: dict[str, torch.Tensor], name: str, what: str) -> torch.Tensor:
    try:
        return tensors[name]
    except KeyError:
        raise InputError(f"the {what} checkpoint has no tensor {name!r}",
                         f"vLLM {VLLM_VERSION} loads it under that name") from None


def json_dump(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, sort_keys=True)


def common(cfg: dict[str, Any], target_cfg: dict[str, Any], what: str, where: str,
           architectures: tuple[str, ...], method: str
           ) -> tuple[TargetSpec, int, tuple[int, ...]]:
    """The checks every drafter that reads aux states shares: its architecture, its widths and
    vocabulary against the target's, and aux ids inside the target. (target, hidden, aux ids)."""
    from specdoctor.oracle.heads import conventions

    arch = (cfg.get("architectures") or [None])[0]
    if arch not in architectures:
        raise InputError(f"the drafter's architecture is {arch!r}, not {what}",
                         f"--method {method} reads {', '.join(architectures)} "
                         f"(vLLM {VLLM_VERSION})")
    target = TargetSpec.of(target_cfg)
    hidden = int(need(cfg, "hidden_size", what, where))
    check_width(what, hidden, target)
    check_width(what, int(cfg.get("target_hidden_size", hidden)), target, "target_hidden_size")
    check_vocab(what, int(need(cfg, "vocab_size", what, where)), target)
    ids = conventions.aux_ids(cfg, target.layers)
    bad = [i for i in ids if not 0 <= i <= target.layers]
    if bad:
        raise InputError(
            f"the drafter reads aux states {list(ids)}, and {bad} is outside the target's "
            f"0..{target.layers} (layer inputs: 0 = embeddings; DFlash's target_layer_ids "
            f"count layer outputs, + 1)", "name layers the target has in the drafter's config")
    return target, hidden, ids
