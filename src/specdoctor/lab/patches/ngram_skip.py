"""The n-gram proposer drafting on only some of its steps: every other step
(``propose_alternate``), one step in three (``propose_third``) or in four
(``propose_quarter``). The lookup runs as it does
unpatched; on the skipped steps its proposals are dropped and every request drafts nothing, as
if no n-gram had matched.

An engine that proposes on fewer steps than its lookup finds a match loses every token those
drafts would have had accepted, with no draft ever differing from the lookup's where it does
propose: a loss of drafts missing, not of drafts wrong. The count is per process (one engine
core serves the lab).
"""

_calls = [0]


def _sometimes(every, original, self, *args, **kwargs):
    out = original(self, *args, **kwargs)
    _calls[0] += 1
    try:
        if _calls[0] % every:
            return [[] for _ in out]
    except TypeError:  # noqa: BLE001 - not a list of drafts: leave the step as it was
        pass
    return out


def propose_alternate(original, self, *args, **kwargs):
    return _sometimes(2, original, self, *args, **kwargs)


def propose_third(original, self, *args, **kwargs):
    return _sometimes(3, original, self, *args, **kwargs)


def propose_quarter(original, self, *args, **kwargs):
    return _sometimes(4, original, self, *args, **kwargs)
