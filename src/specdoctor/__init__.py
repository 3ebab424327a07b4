"""specdoctor: find out why speculative decoding accepts fewer draft tokens than it should.

The data path, one subpackage per stage:

    sources/      read counters the way each engine counts them
    acceptance/   AcceptanceProfile: raw counters, derived figures, intervals
    bench/        the measurement protocol against a live server
    lab/          the embedded default target: real vLLM on CPU, tiny models
    experiments/  verdict experiments (recon, astexec, masks, ...)
    store/        SQLite record of every run
    report/       tables and JSON
    cli/          one file per command group
"""

__version__ = "0.1.0"
