"""The lab's fault catalogue (trained drafters, and the draft model's attention), as data.

Each fault is one realistic mistake in serving a trained drafter, with the root cause that
``specdoctor diagnose`` must name for it, how to apply it (an edit of a copy of the drafter's
config or tensors, and/or the k it is served at), and the profile it was measured to give on
the real lab server (``benchmarks/drafters_faults.py`` measures every fault beside its healthy
drafter; its figures are benchmark results, in ``benchmarks/results/``, and nothing in the
package reads them: a diagnosis must come from measurement and experiments).

A fault never names itself to the engine: the patched copy lives in the lab's models cache
under a name without the fault id, and the server is given its published copy
(``cache.published``), named by content hash and without the lab's build record.

Root causes (the labels ``diagnose`` uses):
- ``attention-mask``: the drafter attends with another mask than it was trained with;
- ``draft-config-mismatch``: the drafter's config wires it to the wrong target features;
- ``tokenizer-mismatch``: draft token ids are mapped to the wrong target tokens;
- ``k-beyond-training``: more draft tokens per step than the drafter was trained to make;
- ``draft-attention-partial``: the draft's attention output is missing part of its heads over
  part of the context (Case B: a draft that reads a context-parallel shard as the whole cache).

A fault may also carry a runtime patch (``runtime_patch``: a pack of ``lab.patches``) that the
lab puts on the server's PYTHONPATH; the pack is built under a content hash and its lines go to
a file of the lab, so neither its directory, its name, the server's env nor its log names the
fault (``lab.patches``).

Apply one: ``specdoctor lab up --method dflash --fault dflash-causal`` (or
``lab_spec(method, fault=…)``).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specdoctor.errors import LabError
from specdoctor.lab import drafters
from specdoctor.lab.drafters import Served, cache

ROOT_CAUSES = ("attention-mask", "draft-config-mismatch", "tokenizer-mismatch",
               "k-beyond-training", "draft-attention-partial")


@dataclass(frozen=True)
class Fault:
    id: str
    method: str
    root_cause: str
    changes: str  # what differs from the healthy server, in words
    why: str  # the real-world mistake it stands for
    k: int | None = None  # served at this k (None: the drafter's trained k)
    config: dict[str, Any] = field(default_factory=dict)  # drafter config.json: dotted key → value
    config_edit: str | None = None  # name of an edit in _CONFIG_EDITS
    tensor_edit: str | None = None  # name of an edit in _TENSOR_EDITS
    runtime_patch: str | None = None  # a pack of lab.patches, on the server's PYTHONPATH

    def apply(self, served: Served) -> Served:
        """The served pair with this fault in it (a patched copy of the drafter, built once)."""
        if served.method != self.method:
            raise LabError(f"fault {self.id} is a {self.method} fault, not {served.method}",
                           f"faults of {served.method}: {', '.join(ids(served.method)) or 'none'}")
        if not self.config and self.config_edit is None and self.tensor_edit is None:
            return served
        src = served.draft if served.draft is not None else served.target
        # the fault id stays in the build record (the lab's own); the name does not carry it
        patched = cache.built(f"{src.name}-patched",
                              {"fault": self.id, "config": self.config,
                               "edits": [self.config_edit, self.tensor_edit]},
                              [src / "config.json", src / "model.safetensors"],
                              lambda out: self._patch(src, out))
        if served.draft is not None:
            return replace(served, draft=patched)
        return replace(served, target=patched)

    def _patch(self, src: Path, out: Path) -> None:
        for f in src.iterdir():
            if f.is_file() and f.name != cache.DONE:
                shutil.copyfile(f, out / f.name)
        cfg = json.loads((out / "config.json").read_text())
        for dotted, value in self.config.items():
            node = cfg
            *parents, last = dotted.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        if self.config_edit is not None:
            _CONFIG_EDITS[self.config_edit](cfg)
        cache.write_config(out, cfg)
        if self.tensor_edit is not None:
            tensors = cache.load_tensors(out)
            _TENSOR_EDITS[self.tensor_edit](tensors)
            cache.save_tensors(out, tensors)


def _d2t_plus_one(t: dict[str, Any]) -> None:
    # every draft id now lands on the target id after the right one
    t["d2t"] = t["d2t"] + 1


def _layer_ids_minus_one(cfg: dict[str, Any]) -> None:
    dc = cfg["dflash_config"]
    dc["target_layer_ids"] = [i - 1 for i in dc["target_layer_ids"]]


_TENSOR_EDITS = {"d2t+1": _d2t_plus_one}
_CONFIG_EDITS = {"target_layer_ids-1": _layer_ids_minus_one}


FAULTS: dict[str, Fault] = {f.id: f for f in (
    Fault("dflash-causal", "dflash", "attention-mask",
          changes="dflash_config.causal = true: the block is served causal",
          why="the drafter was trained non-causal within its block (Case A's mask hypothesis: "
              "a backend or config that silently runs the draft causal)",
          config={"dflash_config.causal": True}),
    Fault("dflash-window", "dflash", "attention-mask",
          changes="dflash_config use_swa + swa_window_size 4: the drafter, trained with full "
                  "attention, sees only the last few positions",
          why="a sliding-window setting carried over from another DFlash family (MiMo's sets "
              "use_swa) or a backend's window convention: part of the trained-on context is "
              "masked out, and nothing errors",
          config={"dflash_config.use_swa": True, "dflash_config.swa_window_size": 4}),
    Fault("dflash-layer-ids", "dflash", "draft-config-mismatch",
          changes="dflash_config.target_layer_ids each one lower ([0, 1] → [-1, 0]): the "
                  "drafter reads the embeddings and layer 0's output instead of the outputs of "
                  "layers 0 and 1",
          why="layer ids written in the other convention (EAGLE3 counts layer inputs, DFlash "
              "layer outputs, and vLLM adds one to DFlash's): shapes still match, nothing "
              "errors",
          config_edit="target_layer_ids-1"),
    Fault("eagle3-d2t-off-by-one", "eagle3", "tokenizer-mismatch",
          changes="d2t + 1: every draft-vocabulary id maps to the target id after its own",
          why="a draft→target vocabulary map built off by one (or for another tokenizer "
              "revision): the drafter predicts well, in the wrong ids",
          tensor_edit="d2t+1"),
    Fault("mtp-k-beyond-training", "mtp", "k-beyond-training",
          changes="num_speculative_tokens 6 (healthy: 2) for an MTP layer trained for one step",
          why="raising k far past what the drafter was trained for (Case A: num_spec 5 = 7 for a "
              "block-8 drafter): the layer is fed its own outputs five times over",
          k=6),
    *(Fault(fault_id, method, "draft-attention-partial",
            changes=f"a runtime patch of vLLM's CPU attention, on the {what}'s attention layers "
                    "only (as its proposer names them): past the first quarter of each sequence, "
                    "3 of every 4 heads of the draft's attention output are zeros (the target's "
                    "attention is untouched)",
            why="Case B: the draft's parallel config lost decode_context_parallel_size, so its "
                "attention read one rank's quarter of a sharded KV cache as the whole context; "
                "on three of four ranks the heads came out all zeros and the next all-reduce "
                "hid it. Nothing errors; acceptance falls",
            runtime_patch="attn-shard")
      for fault_id, method, what in (("draft-heads-lost", "draft_model", "draft model"),
                                     ("eagle3-heads-lost", "eagle3", "EAGLE3 drafter"),
                                     ("dflash-heads-lost", "dflash", "DFlash drafter"))),
)}


def get(fault_id: str) -> Fault:
    try:
        return FAULTS[fault_id]
    except KeyError:
        raise LabError(f"no lab fault {fault_id!r}", f"choose one of: {', '.join(FAULTS)}") from None


def of(fault_id: str, method: str) -> Fault:
    """The fault, refused (naming the method's own) where it is another method's."""
    f = get(fault_id)
    if f.method != method:
        raise LabError(f"fault {fault_id} is a {f.method} fault, not {method}",
                       f"faults of {method}: {', '.join(ids(method)) or 'none'}")
    return f


def serve(method: str, fault: str | None = None, **kw: Any) -> Served:
    """``drafters.serve`` with ``fault`` applied (checked before anything is built)."""
    f = of(fault, method) if fault is not None else None
    served = drafters.serve(method, **kw)
    return served if f is None else replace(f.apply(served), fault=f.id)


def ids(method: str | None = None) -> list[str]:
    return [f.id for f in FAULTS.values() if method is None or f.method == method]


def catalogue() -> list[dict[str, Any]]:
    """Every fault as plain data (for the docs and the fault clinic)."""
    return [{"id": f.id, "method": f.method, "root_cause": f.root_cause, "changes": f.changes,
             "why": f.why, "k": f.k} for f in FAULTS.values()]
