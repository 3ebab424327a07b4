"""The startup probes as a verdict experiment: what the live engine built for the draft
(``view``), compared with what the files and the launch say (``compare``), run on the relaunch
the ``fresh-state`` launch group shares (``experiment``)."""
