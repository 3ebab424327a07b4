"""Kept for existing imports: launching servers lives in ``specdoctor.launch``."""

from specdoctor.launch.process import *  # noqa: F403 - the same names as before the move
from specdoctor.launch.spec import LaunchSpec  # noqa: F401
