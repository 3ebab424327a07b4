"""`specdoctor metrics FILE|URL`: the profile from one Prometheus dump (cumulative counters)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from specdoctor.acceptance.profile import AcceptanceProfile
from specdoctor.cli.options import example, json_option, plot_option, record, store_options
from specdoctor.errors import InputError, TargetError
from specdoctor.textfile import mib, read_limited
from specdoctor.report.plot import write_plot
from specdoctor.report.table import profile_table
from specdoctor.sources import registry
from specdoctor.sources.base import printable
from specdoctor.sources.registry import ENGINES, engine_of_metrics


@click.command(epilog=example(
    "specdoctor metrics http://127.0.0.1:8000 --json"))
@click.argument("source")
@click.option("--engine", type=click.Choice(ENGINES), default=None,
              help="Engine that serves the metrics (default: detected from the metric names).")
@store_options
@plot_option
@json_option
def metrics(source: str, engine: str | None, db: Path | None, no_store: bool, plot: Path | None,
            as_json: bool) -> None:
    """Read one Prometheus exposition: a file, - for stdin, or a server URL (its /metrics is
    fetched).
    The counters are cumulative since the server started; for one run's figures use
    `specdoctor measure`, which takes the delta of two scrapes.
    """
    import time

    text = _read(source)
    try:
        engine = engine or _detect(text, source)
        profile = _parse(text, engine)
    except InputError as exc:
        if _is_url(source):  # what a server answered is the server's doing (exit 3)
            raise TargetError(exc.problem, exc.fix) from exc
        raise
    result: dict[str, object] = {"engine": engine, "source": source, "total": profile.to_json()}
    run_id = record(db, no_store, kind="metrics", engine=engine, target=source, params={},
                    result=result, profile=profile.to_json(), scrapes=[("dump", time.time(), text)])
    if plot is not None:
        write_plot(plot, {"cumulative": profile}, f"{engine} · {source}")
    if as_json:
        click.echo(json.dumps({**result, "run_id": run_id}))
        return
    Console().print(profile_table(profile, f"{engine} · {source} (cumulative since start)",
                                    engine=engine))


MAX_BODY = 64 << 20  # bytes of a /metrics body, as bench.http caps one read from a URL


def _is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def _read(source: str) -> str:
    if _is_url(source):
        from specdoctor.bench.http import get_text

        url = source if source.rstrip("/").endswith("/metrics") else source.rstrip("/") + "/metrics"
        return get_text(url)
    if source == "-":
        data = click.get_binary_stream("stdin").read(MAX_BODY + 1)
        if len(data) > MAX_BODY:
            raise InputError(f"stdin holds more than {mib(MAX_BODY)}, past the limit for a "
                             "/metrics body", "pass the body of one server's /metrics")
        return _text(data, "stdin")
    path = Path(source)
    if not path.exists() or path.is_dir():
        raise InputError(f"{printable(source)}: no such file",
                         "pass a saved /metrics body, - for stdin, or a URL http://HOST:PORT")
    return _text(read_limited(path, "/metrics body", MAX_BODY), source)


def _text(data: bytes, name: str) -> str:
    """The body as text; a binary file is refused without showing its bytes."""
    if b"\x00" in data[:4096]:
        raise InputError(f"{printable(name)} is a binary file, not a /metrics body",
                         "pass the text a server returns on /metrics (curl -s URL/metrics > dump.txt)")
    return data.decode("utf-8", "replace")


def _detect(text: str, name: str) -> str:
    engine = engine_of_metrics(text)
    if engine is None:
        raise InputError(
            f"no speculative-decoding metrics in {name} (none of vllm:spec_decode_*, "
            "sglang:spec_*, llamacpp:spec_decode_*)",
            "pass the /metrics body of a server running with speculative decoding (llama-server "
            "needs --metrics), or name the engine with --engine",
        )
    return engine


def _parse(text: str, engine: str) -> AcceptanceProfile:
    return registry.source(engine).profile_from_prometheus(text)
