"""Tensor taps: named tensors dumped from inside a server, checked offline in fp64.

tap.py (the in-process API and its environment gate; safe to import from a
sitecustomize probe), records.py (reading a tap directory), attention.py (fp64
attention recomputed from dumped q, K/V pages and metadata, fp8 pages dequantized),
crossrank.py (what ranks disagree on before the reduction hides it), check.py (the
verdict of `specdoctor taps check`), case_b.py (Case B in miniature with torch.distributed).
"""
