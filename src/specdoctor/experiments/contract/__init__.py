"""The drafter's contract: every config key and checkpoint tensor the installed engine reads for
the served method, found in the engine's own source, and the drafter's files checked against it.

- ``reads``: a static pass over Python source (``ast``, nothing imported): which keys of a
  config a function reads, how (attribute, ``getattr`` with its default, ``.get``, ``in``), what
  it does to them (``bool()``, each id ``+ 1``, sorted), the keys it writes, the checkpoint
  tensors its ``load_weights`` skips and the config flag that decides it;
- ``scope``: where vLLM 0.32 reads a drafter's config for a method (the model class its registry
  names for the drafter's architecture, the proposer, the runner's aux-layer lookup, the
  speculative config), and the few rules read straight out of functions (the target's default
  aux layers, how collected aux ids are normalised);
- ``contract``: the two together for one served setup, with the files cited by sha256;
- ``tokens``: what a tokenizer says about a token id;
- ``compare``: each read key against every reference there is (the target's config, vLLM's
  default, the tokenizer, ranges and tensor shapes, training metadata in the checkpoint): the
  suspects, each with the values a counterfactual should try, and what could not be checked.
"""
