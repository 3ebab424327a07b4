"""start / wait_ready / stop on real processes (no engine needed): a server that never becomes
ready is stopped after the timeout and its log tail is shown; one that exits early says so;
``running`` and ``Servers`` stop what they started, however the work with it ends."""

import sys
import time
from pathlib import Path

import pytest

from specdoctor.errors import LabError
from specdoctor.launch import (
    LaunchSpec, Servers, free_port, http_ok, running, start, stop, wait_ready,
)


def _spec(code: str) -> LaunchSpec:
    return LaunchSpec(argv=(sys.executable, "-c", code), port=free_port(), label="t")


def test_never_ready_is_stopped_with_its_log_tail(tmp_path: Path):
    h = start(_spec("import time\nprint('loading weights 3/7', flush=True)\ntime.sleep(120)"),
              tmp_path / "s.log")
    t0 = time.monotonic()
    with pytest.raises(LabError, match="not ready after 2 s") as exc:
        wait_ready(h, timeout_s=2, poll_s=0.2)
    assert "loading weights 3/7" in str(exc.value)
    assert time.monotonic() - t0 < 30
    assert not h.alive()  # stopped, not left behind


def test_exit_during_start_up_is_reported(tmp_path: Path):
    h = start(_spec("import sys\nprint('CUDA out of memory', flush=True)\nsys.exit(1)"),
              tmp_path / "s.log")
    with pytest.raises(LabError, match="exited during start-up") as exc:
        wait_ready(h, timeout_s=30, poll_s=0.2)
    assert "CUDA out of memory" in str(exc.value)


def test_environment_overrides_reach_the_server(tmp_path: Path):
    spec = _spec("import os\nprint('V=' + os.environ['SPECDOCTOR_T'], flush=True)").with_env(
        SPECDOCTOR_T="42")
    h = start(spec, tmp_path / "s.log")
    for _ in range(100):
        if not h.alive():
            break
        time.sleep(0.1)
    stop(h)
    assert "V=42" in (tmp_path / "s.log").read_text()


# A server that answers every GET with 200, on the port given as its argument.
READY = """import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _ready_spec() -> LaunchSpec:
    port = free_port()
    return LaunchSpec(argv=(sys.executable, "-c", READY, str(port)), port=port, label="t")


def test_running_stops_the_server_however_the_block_ends(tmp_path: Path):
    with running(_ready_spec(), tmp_path / "a.log", timeout_s=30) as server:
        assert http_ok(server.url + "/v1/models") and server.alive()
    assert not server.alive()
    with pytest.raises(RuntimeError, match="measurement broke"):
        with running(_ready_spec(), tmp_path / "b.log", timeout_s=30) as broken:
            raise RuntimeError("measurement broke")
    assert not broken.alive()


def test_servers_keeps_every_server_until_stop_all(tmp_path: Path):
    servers = Servers(timeout_s=30)
    a = servers.start(_ready_spec(), tmp_path / "a.log")
    b = servers.start(_ready_spec(), tmp_path / "b.log")
    servers.stop(a)
    assert servers.live == [b] and not a.alive() and b.alive()
    servers.stop_all()
    assert servers.live == [] and not b.alive()
    with pytest.raises(LabError, match="exited during start-up"):
        servers.start(_spec("import sys; sys.exit(2)"), tmp_path / "c.log")
    assert servers.live == []
