"""Kept for existing imports: launching servers lives in ``specdoctor.launch``."""

from specdoctor.launch.process import (  # noqa: F401
    READY_PATH,
    ServerHandle,
    free_port,
    http_ok,
    last_log_line,
    load_handle,
    port_in_use,
    save_handle,
    start,
    stop,
    tail,
    wait_ready,
)
from specdoctor.launch.spec import LaunchSpec  # noqa: F401
