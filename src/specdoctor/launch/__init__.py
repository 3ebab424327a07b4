"""Launch specs and servers: parse a server's real command line, change one thing, start it,
wait until it is ready, stop it.

The one launch type (``LaunchSpec``, from ``parse_command``) and the one module that owns a
server's life (``servers``), used by bench, sweep, diagnose and its experiments, the
compile-cache A/B and the lab::

    from specdoctor.launch import free_port, parse_command, running

    spec = parse_command("HF_HOME=/x vllm serve MODEL --speculative-config '{...}'")
    for k in (2, 4):
        s = spec.with_k(k).with_port(free_port())
        with running(s, log_path, timeout_s=600) as server:   # stopped when the block ends
            measure(server.url)
"""

from specdoctor.launch.engines import Speculation
from specdoctor.launch.servers import (
    ServerHandle,
    Servers,
    free_port,
    http_ok,
    launch,
    load_handle,
    port_in_use,
    running,
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
    "LaunchSpec", "ServerHandle", "Servers", "Speculation", "free_port", "http_ok", "launch",
    "load_handle", "parse_command", "port_in_use", "running", "save_handle", "start", "started",
    "stop", "stop_started", "stopping_started_on_exit", "tail", "wait_ready",
]
