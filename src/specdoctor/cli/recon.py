"""`specdoctor recon extract|diff|presets`: engine source out of images, wheels and envs.

    specdoctor recon extract image.tar --pick vllm -o snap-image
    specdoctor recon extract pip:vllm==0.28.0 --pick vllm -o snap-028
    specdoctor recon diff snap-image snap-028
    specdoctor recon presets
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from specdoctor.cli.options import example, json_option, list_option, out_option
from specdoctor.errors import InputError
from specdoctor.recon.extract import extract as run_extract
from specdoctor.recon.manifest import Snapshot, is_snapshot, load_snapshot
from specdoctor.recon.diff import CONTEXT
from specdoctor.recon.presets import DEFAULT_PICKS, PRESETS
from specdoctor.recon.writer import Limits

if TYPE_CHECKING:
    from specdoctor.recon.diff import SnapshotDiff

# rich is imported only to draw: `--json` in a script starts without it.


@contextlib.contextmanager
def _status(text: str) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr when it is a terminal, nothing otherwise."""
    if not sys.stderr.isatty():
        yield lambda _msg: None
        return
    from specdoctor.report.console import err_console
    from specdoctor.safe_text import markup

    # layer labels and sources come from the image: shown, never sent
    with err_console().status(markup(text)) as status:
        yield lambda msg: status.update(markup(msg))


def _human(n: int) -> str:
    """Bytes as ``_size`` reads them back: the largest exact unit (2048 MiB -> 2G)."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


L = Limits()  # the defaults shown here are the extractor's own


def _size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)i?[bB]?\s*", text)
    if not m:
        raise InputError(f"cannot read size {text!r}", "write a number with an optional K, M or G")
    return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]


@click.group(epilog=example(
    "specdoctor recon extract pip:vllm==0.28.0 --pick vllm -o snap-028"))
def recon() -> None:
    """Static reconnaissance: engine source out of images, wheels and environments, no GPU.
    """


@recon.command(epilog=example(
    "specdoctor recon extract image.tar --pick vllm,vllm:attention -o snap-image"))
@click.argument("source")
@list_option("--pick", "picks", default=DEFAULT_PICKS, show_default=",".join(DEFAULT_PICKS),
             help="Presets (vllm, vllm:attention, sglang, …) or package-path globs.")
@out_option("Snapshot directory (new, empty, or an earlier snapshot to replace).", required=True)
@click.option("--root", default=None,
              help="Package root inside the source when the package exists in several places.")
@click.option("--image", default=None, help="Image name when the archive holds several.")
@click.option("--platform", default=None, help="OS/ARCH when an OCI index holds several.")
@click.option("--max-files", type=click.IntRange(min=1), default=L.max_files, show_default=True)
@click.option("--max-file-size", default=_human(L.max_file_bytes), show_default=True)
@click.option("--max-total-size", default=_human(L.max_total_bytes), show_default=True)
@click.option("--max-members", type=click.IntRange(min=1), default=L.max_members,
              show_default=True,
              help="Entries read across all layers before the source is refused (header floods).")
@click.option("--max-scanned-size", default=_human(L.max_scanned_bytes), show_default=True,
              help="Expanded layer data read before the source is refused (decompression bombs).")
@json_option
def extract(source: str, picks: tuple[str, ...], out_dir: Path, root: str | None,
            image: str | None, platform: str | None, max_files: int, max_file_size: str,
            max_total_size: str, max_members: int, max_scanned_size: str,
            as_json: bool) -> None:
    """Write the picked files of SOURCE and a manifest into -o DIR.

    SOURCE: an image archive from `docker save`, an OCI layout (directory or
    tar), a wheel, pip:SPEC (downloaded with pip, no dependencies), a
    site-packages or checkout directory, or docker://IMAGE (needs a running
    Docker engine; the container is created and removed, never started).
    """
    outdir = out_dir
    limits = Limits(max_files=max_files, max_file_bytes=_size(max_file_size),
                    max_total_bytes=_size(max_total_size), max_members=max_members,
                    max_scanned_bytes=_size(max_scanned_size))
    with _status(f"reading {source}") as update:
        snap, stats = run_extract(source, outdir, list(picks), root=root, image=image,
                                  platform=platform, limits=limits,
                                  on_layer=lambda label: update(f"reading {label}"))
    if as_json:
        click.echo(json.dumps(snap.to_json(), indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    from specdoctor.safe_text import markup

    out = Console()
    # member names come from the archive: shown with their control characters escaped
    table = Table(title=f"{len(snap.files)} files from {markup(snap.label())}",
                  title_justify="left")
    for col in ("package path", "bytes", "sha256", "layer"):
        table.add_column(col, justify="right" if col == "bytes" else "left")
    for f in snap.files:
        table.add_row(markup(f.path), str(f.size), f.sha256[:12], markup(f.layer[:19]))
    out.print(table)
    if snap.source.get("digest"):
        out.print(f"source digest: {markup(snap.source['digest'])}")
    for s in snap.skipped:
        out.print(f"[yellow]skipped[/yellow] {markup(s.path)}: {markup(s.reason)}", highlight=False)
    out.print(f"manifest: {outdir / 'manifest.json'}  ({stats.members} entries in "
              f"{stats.layers} layer(s) read in {stats.seconds:.1f} s)")


@recon.command(epilog=example(
    "specdoctor recon diff snap-image pip:vllm==0.28.0 --stat"))
@click.argument("a")
@click.argument("b")
@click.option("--context", type=click.IntRange(0, 10_000), default=CONTEXT, show_default=True,
              help="Lines of context.")
@click.option("--stat", "stat_only", is_flag=True, help="Only the list of changed files.")
@out_option("Where to keep the snapshot made when A or B is a SOURCE (default: a temporary "
            "folder, removed).", hidden=("--save",), default=None)
@json_option
def diff(a: str, b: str, context: int, stat_only: bool, out_dir: Path | None,
         as_json: bool) -> None:
    """Chain files that changed between snapshots A and B (either may be a SOURCE).
    """
    save = out_dir
    from specdoctor.recon.diff import diff_snapshots

    with tempfile.TemporaryDirectory(prefix="specdoctor-diff-") as tmp:
        a_dir, b_dir = _snapshot_pair(a, b, save or Path(tmp) / "snap")
        result = diff_snapshots(load_snapshot(a_dir), a_dir, load_snapshot(b_dir), b_dir, context)
        if as_json:
            click.echo(json.dumps(_diff_json(result), indent=1))
        else:
            _print_diff(result, stat_only)


def _snapshot_pair(a: str, b: str, scratch: Path) -> tuple[Path, Path]:
    pa, pb = Path(a), Path(b)
    if is_snapshot(pa) and is_snapshot(pb):
        return pa, pb
    if not is_snapshot(pa) and not is_snapshot(pb):
        raise InputError("neither side is a snapshot",
                         "extract one first: specdoctor recon extract SOURCE -o DIR")
    snap_dir, source = (pa, b) if is_snapshot(pa) else (pb, a)
    picks = load_snapshot(snap_dir).picks
    with _status(f"extracting {source} with picks {', '.join(picks)}"):
        run_extract(source, scratch, picks)
    return (snap_dir, scratch) if snap_dir == pa else (scratch, snap_dir)


def _diff_json(d: SnapshotDiff) -> dict[str, object]:
    def side(snap: Snapshot) -> dict[str, object]:
        return {"source": snap.source, "packages": [p.__dict__ for p in snap.packages]}

    return {
        "a": side(d.a), "b": side(d.b), "identical": d.identical,
        "edited_after_extraction": [e.__dict__ for e in d.edited],
        "files": [{"path": f.path, "status": f.status, "moved_from": f.moved_from,
                   "a_sha256": f.a.sha256 if f.a else None, "b_sha256": f.b.sha256 if f.b else None,
                   "added_lines": f.added_lines, "removed_lines": f.removed_lines, "diff": f.text}
                  for f in d.files],
    }


def _print_diff(d: SnapshotDiff, stat_only: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    from specdoctor.safe_text import markup, visible

    out = Console()
    out.print(f"a: {visible(d.a.label())}", highlight=False, markup=False)
    out.print(f"b: {visible(d.b.label())}", highlight=False, markup=False)
    for e in d.edited:
        out.print(visible(e.describe()), style="red", highlight=False, markup=False)
    if d.identical:
        out.print("identical: every picked file has the same sha256")
        return
    table = Table(title_justify="left")
    for col in ("status", "package path", "+", "-"):
        table.add_column(col)
    for f in d.files:
        path = f"{f.moved_from} → {f.path}" if f.moved_from else f.path
        table.add_row(f.status, markup(path), str(f.added_lines or ""),
                      str(f.removed_lines or ""))
    out.print(table)
    if stat_only:
        return
    for f in d.by_status("changed"):
        for line in f.text.splitlines():
            style = ("green" if line.startswith("+") else "red" if line.startswith("-")
                     else "cyan" if line.startswith("@@") else "dim" if line.startswith("#") else None)
            out.print(visible(line), style=style, highlight=False, markup=False, soft_wrap=True)


@recon.command(epilog=example(
    "specdoctor recon presets --json"))
@json_option
def presets(as_json: bool) -> None:
    """The presets --pick accepts and the globs behind them.
    """
    if as_json:
        click.echo(json.dumps(PRESETS, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table()
    for col in ("pick", "globs"):
        table.add_column(col)
    for name, groups in PRESETS.items():
        for group, globs in groups.items():
            table.add_row(f"{name}:{group}", "\n".join(globs))
    Console().print(table)
