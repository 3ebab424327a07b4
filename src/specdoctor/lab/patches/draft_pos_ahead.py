"""Draft decode steps one position ahead (SGLang PR #25015, reintroduced in vLLM's proposer).

SGLang's EAGLE worker advanced the shared positions tensor (``positions.add_(1)``) before each
draft decode forward instead of after it, so every draft decode step ran its rotary embedding
one position past the token it drafts ("draft decode forward positions=tensor([8]) # wrong,
should be 7"); the first pass over the verified tokens was right.

vLLM 0.32's proposer computes each draft step's positions, slot mapping and sequence lengths
in ``_update_positions_dependent_metadata``. This wrapper keeps the slot mapping and sequence
lengths the original computes and hands the model positions one higher, as SGLang did; the
next step starts again from the true positions, so the offset stays one and never grows.
``ahead_two`` runs them two positions ahead; ``behind`` is the other direction: positions one lower (decode steps run past the prompt, so
never below 0).
"""


def update(original, self, positions, *args, **kwargs):
    buf = self.positions
    if getattr(self, "_ahead_view", None) is not None and positions.data_ptr() == buf.data_ptr():
        positions = positions - 1  # the view we shifted last step: start from the true ones
    out = original(self, positions, *args, **kwargs)
    try:
        if out.dim() == 1 and out.data_ptr() == buf.data_ptr():
            out += 1
            self._ahead_view = True
    except Exception:  # noqa: BLE001 - leave the step as it was
        pass
    return out


def behind(original, self, positions, *args, **kwargs):
    buf = self.positions
    if getattr(self, "_behind_view", None) is not None and positions.data_ptr() == buf.data_ptr():
        positions = positions + 1  # the view we shifted last step: start from the true ones
    out = original(self, positions, *args, **kwargs)
    try:
        if out.dim() == 1 and out.data_ptr() == buf.data_ptr():
            out -= 1
            self._behind_view = True
    except Exception:  # noqa: BLE001 - leave the step as it was
        pass
    return out


def ahead_two(original, self, positions, *args, **kwargs):
    buf = self.positions
    if getattr(self, "_ahead_two_view", None) is not None and \
            positions.data_ptr() == buf.data_ptr():
        positions = positions - 2  # the view we shifted last step: start from the true ones
    out = original(self, positions, *args, **kwargs)
    try:
        if out.dim() == 1 and out.data_ptr() == buf.data_ptr():
            out += 2
            self._ahead_two_view = True
    except Exception:  # noqa: BLE001 - leave the step as it was
        pass
    return out
