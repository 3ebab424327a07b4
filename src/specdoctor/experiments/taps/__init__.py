"""Tensor taps: named tensors dumped from inside a server, checked offline in fp64.

The writing side runs in the engine and lives with the probe packs (``packs/tap.py``, the
in-process API and its environment gate; ``packs/tap_vllm_cpu.py``, vLLM's CPU attention).
Here: records.py (reading a tap directory), attention.py (fp64 attention recomputed from
dumped q, K/V pages and metadata, fp8 pages dequantized), heads.py (per-head comparison),
crossrank.py (what ranks disagree on before the reduction hides it), check.py (the verdict of
`specdoctor taps check`), case_b.py (Case B in miniature with torch.distributed) and
experiment.py (the ``taps`` verdict experiment of ``diagnose``).
"""
