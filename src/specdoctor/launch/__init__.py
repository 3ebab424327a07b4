"""Launch specs: parse a server's real command line, change one thing, start, wait, stop.

The typed library every relaunch experiment uses (bench, sweep, diagnose)::

    from specdoctor.launch import parse_command, start, wait_ready, stop

    spec = parse_command("vllm serve MODEL --speculative-config '{...}'", env={"HF_HOME": "/x"})
    for k in (2, 4):
        s = spec.with_k(k).with_port(free_port())
        h = start(s, log_path)
        wait_ready(h, timeout_s=600)   # stops the server and shows its log tail on failure
        ...
        stop(h)
"""

from specdoctor.launch.engines import Speculation
from specdoctor.launch.process import (
    ServerHandle,
    free_port,
    http_ok,
    load_handle,
    port_in_use,
    save_handle,
    start,
    started,
    stop,
    stop_started,
    stopping_started_on_exit,
    tail,
    wait_ready,
)
from specdoctor.launch.spec import LaunchSpec, parse_command

__all__ = [
    "LaunchSpec", "ServerHandle", "Speculation", "free_port", "http_ok", "load_handle",
    "parse_command", "port_in_use", "save_handle", "start", "started", "stop", "stop_started",
    "stopping_started_on_exit", "tail", "wait_ready",
]
