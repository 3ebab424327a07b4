"""A real process standing in for an engine's server in tests of how diagnose starts and stops
servers: it answers ``/v1/models`` (so it is "ready"), shows spec-decode counters that never move, and spawns
one worker process in its group, as an engine's API process does.

    python fake_server.py --port N [--hang] [--log PATH]

``--hang``: completions never answer (a diagnosis stays busy measuring until it is stopped).
``--log PATH``: every completion request appends a metrics line with nothing accepted to PATH,
as a live server's log grows while it is measured. It prints ``worker <pid>`` once the worker
runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HANG = "--hang" in sys.argv
LOG = sys.argv[sys.argv.index("--log") + 1] if "--log" in sys.argv else None
ZERO_WINDOW = ("(APIServer pid=1) INFO 11-29 09:00:00 [metrics.py:120] SpecDecoding metrics: "
               "Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, Drafted "
               "throughput: 100.00 tokens/s, Accepted: 0 tokens, Drafted: 3000 tokens, "
               "Per-position acceptance rate: 0.000, 0.000, 0.000, Avg Draft acceptance rate: "
               "0.0%\n")
LABELS = 'engine="0",model_name="fake"'
METRICS = "".join(
    f"# TYPE vllm:{name} counter\nvllm:{name}_total{{{LABELS}{extra}}} 0.0\n"
    for name, extra in (("spec_decode_num_drafts", ""), ("spec_decode_num_draft_tokens", ""),
                        ("spec_decode_num_accepted_tokens", ""),
                        ("spec_decode_num_accepted_tokens_per_pos", ',position="0"')))


class Handler(BaseHTTPRequestHandler):
    def _send(self, code: int, body: str, kind: str = "application/json") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/v1/models"):
            self._send(200, json.dumps({"object": "list", "data": [{"id": "fake"}]}))
        elif self.path.startswith("/metrics"):
            self._send(200, METRICS, "text/plain")
        else:
            self._send(404, "{}")

    def do_POST(self) -> None:  # noqa: N802
        if LOG is not None:
            with open(LOG, "a") as fh:
                fh.write(ZERO_WINDOW)
        if HANG:
            time.sleep(600)
        self._send(404, json.dumps({"error": "no completions here"}))

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    port = int(sys.argv[sys.argv.index("--port") + 1])
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"worker {worker.pid}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
