"""vLLM's compile cache: what is in it, who wrote it, and whether it changes acceptance.

- ``scan.scan(root, logs) -> CacheScan``: both on-disk layouts, each entry with the launches
  that saved, loaded or failed to load it, and keys shared by differing speculative configs;
- ``ab.ab(spec, measure_fn) -> ABResult``: the same launch with the cache as found and with an
  isolated fresh root, verdict "recovered" / "no effect" / "inconclusive".
"""
