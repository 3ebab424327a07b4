"""Draft decode steps one position ahead (SGLang PR #25015, reintroduced in vLLM's proposer).

SGLang's EAGLE worker advanced the shared positions tensor (``positions.add_(1)``) before each
draft decode forward instead of after it, so every draft decode step ran its rotary embedding
one position past the token it drafts ("draft decode forward positions=tensor([8]) # wrong,
should be 7"); the first pass over the verified tokens was right.

vLLM 0.32's proposer computes each draft step's positions, slot mapping and sequence lengths
in ``_update_positions_dependent_metadata``. This wrapper keeps the slot mapping and sequence
lengths the original computes and hands the model positions one higher, as SGLang did; the
next step starts again from the true positions, so the offset stays one and never grows.
``ahead_two`` runs them two positions ahead; ``behind`` is the other direction: positions one
lower (decode steps run past the prompt, so never below 0); ``behind_two``: two lower.
"""


def _shifted(original, self, positions, by, mark, *args, **kwargs):
    """The original's positions moved by ``by``; ``mark`` remembers that the buffer the next
    step starts from was moved, so it starts from the true positions again."""
    buf = self.positions
    if getattr(self, mark, None) is not None and positions.data_ptr() == buf.data_ptr():
        positions = positions - by  # the view we shifted last step: start from the true ones
    out = original(self, positions, *args, **kwargs)
    try:
        if out.dim() == 1 and out.data_ptr() == buf.data_ptr():
            out += by
            setattr(self, mark, True)
    except Exception:  # noqa: BLE001 - leave the step as it was
        pass
    return out


def update(original, self, positions, *args, **kwargs):
    return _shifted(original, self, positions, 1, "_ahead_view", *args, **kwargs)


def behind(original, self, positions, *args, **kwargs):
    return _shifted(original, self, positions, -1, "_behind_view", *args, **kwargs)


def ahead_two(original, self, positions, *args, **kwargs):
    return _shifted(original, self, positions, 2, "_ahead_two_view", *args, **kwargs)


def behind_two(original, self, positions, *args, **kwargs):
    return _shifted(original, self, positions, -2, "_behind_two_view", *args, **kwargs)
