"""Verdict experiments: each answers the ledger of ``specdoctor diagnose`` through one interface
(``base``), decides with the catalogue's rules (``rules``) and is found through its entry in the
hypothesis catalogue (``verdict/data/catalogue.json``: module path and ``built | planned``).

One module per experiment (``logs_scan``, ``oracle_gap``, ``counterfactual``, ``vocab``,
``depth``, ``relaunch``), or a package whose ``experiment`` module holds it beside its tools
(``compile_cache``, ``config_audit``, ``taps``). This package never imports ``diagnose`` or
``lab``; docs/experiments-layout.md says where a new experiment goes.
"""
