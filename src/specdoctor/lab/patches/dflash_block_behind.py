"""DFlash draft block roped one position behind (ik_llama.cpp PR #2296, put into vLLM).

ik_llama.cpp's DFlash/DSpark drafter seeded its draft block (the bonus token and the masked
slots) at the position of the last committed context row instead of the bonus token's own
position: every query of the block was roped one position early, while the context keys kept
their true positions, so every query-to-context distance was off by one.

vLLM 0.32's DFlash proposer writes the context's positions and slots to buffers of their own
and hands the model the block's query positions in ``build_model_inputs_first_pass``. This
wrapper keeps everything the original computes and lowers those query positions by one
(clamped at 0); the context KV is stored at its true positions. ``first_pass_two``: two
positions lower; ``first_pass_ahead``: one position higher (the other direction);
``first_pass_ahead_two``: two higher.
"""


def _moved(original, self, by, *args, **kwargs):
    inputs, n = original(self, *args, **kwargs)
    inputs = dict(inputs)
    inputs["positions"] = (inputs["positions"] + by).clamp(min=0)
    return inputs, n


def first_pass(original, self, *args, **kwargs):
    return _moved(original, self, -1, *args, **kwargs)


def first_pass_two(original, self, *args, **kwargs):
    return _moved(original, self, -2, *args, **kwargs)


def first_pass_ahead(original, self, *args, **kwargs):
    return _moved(original, self, 1, *args, **kwargs)


def first_pass_ahead_two(original, self, *args, **kwargs):
    return _moved(original, self, 2, *args, **kwargs)
