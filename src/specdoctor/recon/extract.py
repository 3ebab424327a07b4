"""`recon extract`: the picked files of a source, written as a snapshot with a manifest.

Layers are applied bottom to top the way an overlay filesystem would: a later
file replaces an earlier one, `.wh.NAME` deletes NAME from the layers below,
`.wh..wh..opq` empties its directory of everything from the layers below.
Only picked paths are ever written; all other bodies are skipped unread.

    from specdoctor.recon.extract import extract
    snap = extract("image.tar", Path("snap"), ["vllm"])
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from specdoctor.errors import InputError
from specdoctor.recon.manifest import (
    MANIFEST_NAME,
    FileRecord,
    Skipped,
    Snapshot,
    is_snapshot,
    load_snapshot,
    parse_metadata,
    write_snapshot,
)
from specdoctor.recon.picks import Picker, clean_parts, make_picker
from specdoctor.recon.sources import Entry, open_source
from specdoctor.recon.writer import LimitExceeded, Limits, SafeWriter

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
MAX_SKIPPED_LISTED = 200


@dataclass
class _Owned:
    record: FileRecord
    root: str
    site: bool  # root is a site-/dist-packages directory
    layer_index: int


@dataclass
class ExtractStats:
    members: int = 0
    scanned_bytes: int = 0
    layers: int = 0
    seconds: float = 0.0


class _Overlay:
    """Applies layer entries to the snapshot being written."""

    def __init__(self, writer: SafeWriter, picker: Picker, limits: Limits) -> None:
        self.writer, self.picker, self.limits = writer, picker, limits
        self.owned: dict[str, _Owned] = {}
        self.skipped: list[Skipped] = []
        self.stats = ExtractStats()
        # Source paths of picked files and all their directories ("" is the root), so a
        # whiteout that cannot hide any of them is dismissed without a scan.
        self._sources: set[str] = set()
        self._ancestors: set[str] = set()

    def apply(self, layer_index: int, layer_id: str, entries: Iterator[Entry]) -> None:
        stats, limits, picker = self.stats, self.limits, self.picker
        for entry in entries:
            stats.members += 1
            stats.scanned_bytes += entry.size
            if stats.members > limits.max_members or stats.scanned_bytes > limits.max_scanned_bytes:
                self._over_limit()
            name = entry.name
            if ".wh." not in name and not (name.startswith("/") or ".." in name or "\0" in name) \
                    and not picker.could_match(name):
                continue  # the common case: not picked, not a whiteout, not hostile
            parts = clean_parts(name)
            if parts is None:
                self._skip(entry.name, "unsafe path (absolute, '..' or NUL): not written")
                continue
            if parts[-1].startswith(WHITEOUT):
                self._whiteout(parts, layer_index)
                continue
            hit = self.picker.match(parts)
            if hit is None:
                continue
            root, rel = hit
            if rel == MANIFEST_NAME:
                self._skip(entry.name, f"would overwrite the snapshot's {MANIFEST_NAME}")
                continue
            if not self._claims(root, rel, entry.name):
                continue
            source_path = "/".join(parts)
            if entry.kind == "file":
                sha, size = self.writer.write(rel, entry.read, entry.size)
                self._own(rel, root, source_path, layer_id, layer_index, sha, size)
            elif entry.kind == "hardlink":
                self._hardlink(entry, rel, root, source_path, layer_id, layer_index)
            else:
                # A later layer put a directory, symlink or device where a picked file was.
                self._drop(rel)
                if entry.kind != "dir":
                    what = {"symlink": f"symlink to {entry.linkname!r}: not followed",
                            "device": "device file: skipped", "fifo": "fifo: skipped"}
                    self._skip(source_path, what.get(entry.kind, f"{entry.kind}: skipped"))
        self.stats.layers += 1

    def _over_limit(self) -> None:
        if self.stats.members > self.limits.max_members:
            raise LimitExceeded(f"the source has more than {self.limits.max_members} entries",
                                "it is not a normal image; raise --max-members if it is")
        if self.stats.scanned_bytes > self.limits.max_scanned_bytes:
            raise LimitExceeded(f"the source expands past {self.limits.max_scanned_bytes} bytes",
                                "a decompression bomb, or raise --max-scanned-size")

    def _claims(self, root: str, rel: str, name: str) -> bool:
        """Whether this root may provide `rel`: site-packages beats a stray copy elsewhere."""
        site = root.split("/")[-1] in ("site-packages", "dist-packages")
        prev = self.owned.get(rel)
        if prev is None or prev.root == root:
            return True
        if prev.site and not site:
            self._skip(name, f"copy outside site-packages ignored (kept {prev.root}); "
                             f"pass --root {root} to take this one")
            return False
        if site and not prev.site:
            return True
        raise InputError(
            f"{rel} exists under two package roots: {prev.root or '.'} and {root or '.'}",
            "choose one with --root ROOT (the directory that holds the package)")

    def _own(self, rel: str, root: str, source_path: str, layer_id: str, layer_index: int,
             sha: str, size: int) -> None:
        site = root.split("/")[-1] in ("site-packages", "dist-packages")
        self.owned[rel] = _Owned(FileRecord(rel, sha, size, source_path, layer_id), root, site,
                                 layer_index)
        self._sources.add(source_path)
        parts = source_path.split("/")
        self._ancestors.update("/".join(parts[:i]) for i in range(len(parts)))

    def _hardlink(self, entry: Entry, rel: str, root: str, source_path: str, layer_id: str,
                  layer_index: int) -> None:
        target_parts = clean_parts(entry.linkname)
        if target_parts is None:
            self._drop(rel)
            self._skip(source_path, f"hardlink to unsafe path {entry.linkname!r}: not written")
            return
        target = "/".join(target_parts)
        src = next((o for o in self.owned.values()
                    if o.record.source_path == target and o.layer_index == layer_index), None)
        if src is None:
            self._drop(rel)
            self._skip(source_path, f"hardlink to {target}, which is not picked: add it to --pick")
            return
        sha, size = self.writer.write(rel, self.writer.read_back(src.record.path), src.record.size)
        self._own(rel, root, source_path, layer_id, layer_index, sha, size)

    def _whiteout(self, parts: tuple[str, ...], layer_index: int) -> None:
        name = parts[-1]
        parent = "/".join(parts[:-1])
        target = parent if name == OPAQUE else "/".join((*parts[:-1], name[len(WHITEOUT):]))
        if target not in self._ancestors and target not in self._sources:
            return  # hides nothing that was picked (the usual case: most whiteouts)
        if name == OPAQUE:
            prefix = parent + "/" if parent else ""
            hidden = [rel for rel, o in self.owned.items()
                      if o.layer_index < layer_index and o.record.source_path.startswith(prefix)]
        else:
            gone = "/".join((*parts[:-1], name[len(WHITEOUT):]))
            hidden = [rel for rel, o in self.owned.items()
                      if o.layer_index < layer_index and (o.record.source_path == gone
                                                          or o.record.source_path.startswith(gone + "/"))]
        for rel in hidden:
            self._drop(rel)

    def _drop(self, rel: str) -> None:
        if self.owned.pop(rel, None) is not None:
            self.writer.remove(rel)

    def _skip(self, path: str, reason: str) -> None:
        if len(self.skipped) < MAX_SKIPPED_LISTED:
            self.skipped.append(Skipped(path, reason))


def prepare_outdir(outdir: Path) -> None:
    """An empty directory, or an earlier snapshot whose files are removed first."""
    if outdir.is_symlink() or (outdir.exists() and not outdir.is_dir()):
        raise InputError(f"{outdir} exists and is not a directory", "choose another -o DIR")
    if not outdir.exists() or not any(outdir.iterdir()):
        return
    if not is_snapshot(outdir):
        raise InputError(f"{outdir} is not empty and is not a snapshot",
                         "choose an empty or new directory for -o")
    old = load_snapshot(outdir)
    writer = SafeWriter(outdir, Limits())
    for rec in old.files:
        writer.written[rec.path] = rec.size
    writer.undo()
    (outdir / MANIFEST_NAME).unlink()


def extract(
    ref: str,
    outdir: Path,
    picks: list[str],
    *,
    root: str | None = None,
    image: str | None = None,
    platform: str | None = None,
    limits: Limits | None = None,
    on_layer: Callable[[str], None] | None = None,
) -> tuple[Snapshot, ExtractStats]:
    limits = limits or Limits()
    picker = make_picker(picks, root)
    started = time.perf_counter()
    with open_source(ref, image, platform) as src:
        prepare_outdir(outdir)
        writer = SafeWriter(outdir, limits)
        overlay = _Overlay(writer, picker, limits)
        try:
            for index, (layer_id, entries, label) in enumerate(src.layers(picker)):
                if on_layer is not None:
                    on_layer(label)
                overlay.apply(index, layer_id, entries)
        except BaseException:
            writer.undo()
            raise
        info = src.info
    files = sorted((o.record for o in overlay.owned.values()), key=lambda r: r.path)
    if not files:
        writer.undo()
        raise InputError(f"no file in {ref} matched {', '.join(picks)}",
                         "check the picks with `specdoctor recon presets`; for an editable "
                         "install pass the source checkout directory instead")
    packages = []
    for rec in files:
        if rec.path.endswith(".dist-info/METADATA"):
            pkg = parse_metadata((outdir / rec.path).read_text(errors="replace"), rec.path)
            if pkg is not None:
                packages.append(pkg)
    snapshot = Snapshot(
        source={"kind": info.kind, "ref": info.ref, "digest": info.digest, **info.details},
        packages=packages,
        picks=list(picks),
        patterns=list(picker.patterns),
        files=files,
        skipped=overlay.skipped,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    write_snapshot(outdir, snapshot)
    overlay.stats.seconds = time.perf_counter() - started
    return snapshot, overlay.stats
