"""Tests of the replay experiment (experiments/replay)."""
