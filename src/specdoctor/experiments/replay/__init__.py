"""The engine replay as a verdict experiment: ``experiment`` relaunches with the draft trace and
re-scores the engine's own steps; ``decide`` says whether a gap is lost in drafting or in
verification (pure)."""
