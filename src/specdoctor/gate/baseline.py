"""A gate baseline: one JSON document, versioned and validated on load.

It holds everything a later gate needs to run the same cells and compare, with nothing of the
machine it was measured on: the matrix (prompt sets, sampling, concurrency, requests per cell,
max tokens, seeds), a digest of each prompt set's prompts, and per cell its k, its per-request
acceptance counts (the bootstrap's units), its totals, and its tok/s spreads (with and, when
the run had one, without speculation). A team commits the file next to its deployment config
(``specdoctor gate --export NAME FILE``) and gates against it anywhere
(``specdoctor gate --baseline FILE``).

Schema ``specdoctor.gate.baseline``, version 1::

    {"schema": "specdoctor.gate.baseline", "version": 1, "name": "…", "saved_at": "…Z",
     "specdoctor": "0.1.0",
     "source": {"bench_run": 12, "kind": "bench", "measured_at": "…Z"},
     "target": {"label": "ngram:k=4", "command": "… | null", "url": "… | null",
                "spec_off_command": "… | null"},
     "matrix": {MatrixParams.to_json()},
     "prompts_sha256": {"code": "…", …},
     "cells": [{"cell": "code/greedy/c1", "suite": "code", "sampling": "greedy",
                "concurrency": 1, "k": 4,
                "requests": [[drafts, draft_tokens, accepted, [accepted at 0, 1, …]], …] | null,
                "request_keys": [[slot, prompt, seed | null], …] (optional),
                "profile": {AcceptanceProfile.to_json(): the totals, with ci95},
                "tok_s": {"value", "low", "high", "basis"} | null,
                "spec_off_tok_s": {…} | null}, …]}

``requests`` is null when the server sent no per-request metrics: that cell's acceptance has
no interval and is reported, not tested. The totals must equal the sum of the requests, so a
hand-edited file is refused rather than trusted.

``request_keys`` says, request by request, which prompt and seed it had (``gate.paired.
RequestKey``: the conversation's slot in the cell, the first 16 hex digits of its sha256, the
seed or null when greedy): the gate pairs the baseline's and the candidate's requests by them.
It is optional (a reader of version 1 without it ignores it). A file written before it was
stored has its keys recovered where that is certain (``infer_keys``), else the gate tests the
cell unpaired.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specdoctor import __version__
from specdoctor.acceptance.bootstrap import with_bootstrap
from specdoctor.acceptance.profile import AcceptanceProfile, sum_profiles
from specdoctor.bench import matrix
from specdoctor.bench.matrix import Cell, MatrixParams
from specdoctor.bench.stats import Spread
from specdoctor.bench.summary import Row
from specdoctor.errors import InputError, SpecdoctorError
from specdoctor.textfile import MAX_CONFIG, read_limited
from specdoctor.gate.compare import CellSample
from specdoctor.gate.paired import RequestKey, prompt_digest
from specdoctor.sources import vllm_response
from specdoctor.store.bench import CellRow

SCHEMA = "specdoctor.gate.baseline"
VERSION = 1
EXPORT_FIX = "export a baseline with: specdoctor gate --export NAME FILE"


@dataclass(frozen=True)
class BaselineCell:
    cell: Cell
    sample: CellSample


@dataclass(frozen=True)
class Baseline:
    name: str | None
    saved_at: str
    source: dict[str, Any]
    target: dict[str, Any]
    matrix: MatrixParams
    prompts_sha256: dict[str, str]
    cells: list[BaselineCell]
    version: int = VERSION

    @property
    def has_spec_off(self) -> bool:
        return any(c.sample.spec_off_tok_s is not None for c in self.cells)

    def samples(self) -> list[CellSample]:
        return [c.sample for c in self.cells]

    def describe(self) -> str:
        where = f"bench run {self.source.get('bench_run')}" if self.source.get("bench_run") \
            is not None else "a bench run"
        return (f"{self.name or 'baseline'} ({where}, measured {self.source.get('measured_at')}, "
                f"{self.target.get('label')})")

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "version": self.version, "name": self.name,
                "saved_at": self.saved_at, "specdoctor": __version__, "source": self.source,
                "target": self.target, "matrix": self.matrix.to_json(),
                "prompts_sha256": self.prompts_sha256,
                "cells": [_cell_json(c) for c in self.cells]}


# ---- from a bench run --------------------------------------------------------------------

KeyedUnits = dict[tuple[str, str], list[tuple[RequestKey, AcceptanceProfile]]]


def cell_samples(rows: Sequence[Row], config: str, keyed: KeyedUnits | None = None
                 ) -> list[tuple[Cell, CellSample]]:
    """The cells of one configuration of a bench run, as the gate compares them; a cell's
    spec-off tok/s comes from the run's spec-off configuration (role ``baseline``), if any.
    ``keyed`` (``request_keys``): each cell's requests with their keys; a cell's keys are kept
    only where its requests, in order, are exactly the row's units."""
    off = {r.cell: r.tok_s for r in rows if r.role == "baseline"}
    out = []
    for r in rows:
        if r.config != config or r.status == "failed":
            continue
        k = r.profile.k if r.profile is not None else None
        units = tuple(r.units) if r.units else None
        if units and k is None:
            k = max((u.k or 0) for u in units) or None
        found = (keyed or {}).get((config, r.cell))
        keys = tuple(key for key, _ in found) if found and units and tuple(
            u for _, u in found) == units else None
        out.append((Cell(r.suite, r.sampling, r.concurrency),
                    CellSample(r.cell, k, units, r.profile, r.tok_s, off.get(r.cell), keys)))
    return out


def request_keys(cells: Sequence[CellRow], params: MatrixParams) -> KeyedUnits:
    """(configuration, cell) → each request that carries spec-decode metrics, with its key,
    in the order the bench summary takes the cell's units (ok repeats, then requests without
    error), read from the per-request records of a stored bench run (their ``index`` says
    which conversation and seed the request had: ``bench.matrix.requests``). Empty for a
    prompt set whose prompts cannot be read (a dataset file no longer there)."""
    groups: dict[tuple[str, str], list[CellRow]] = {}
    for c in cells:
        name = c.result.get("cell") or Cell(c.suite, c.sampling, c.concurrency).name
        groups.setdefault((c.config, name), []).append(c)
    convs: dict[str, list[list[str]]] = {}
    out: KeyedUnits = {}
    for (config, name), reps in groups.items():
        suite, sampling = reps[0].suite, reps[0].sampling
        if suite not in convs:
            try:
                convs[suite] = matrix.conversations(params, suite)
            except (SpecdoctorError, KeyError, OSError):
                convs[suite] = []
        if not convs[suite]:
            continue
        multi = any(len(conv) > 1 for conv in convs[suite])
        seeded = sampling == "official" and params.official_temperature > 0
        ok = [c.result for c in reps if c.status == "ok"] or \
            [c.result for c in reps if c.result.get("requests_ok")]
        keyed = []
        for q in (q for r in ok for q in r.get("requests", []) if q.get("error") is None):
            index = q.get("index")
            unit = vllm_response.profile_from_block(q["spec"]) if q.get("spec") else None
            slot = index // 100 if multi and isinstance(index, int) else index
            if unit is None or not isinstance(slot, int) or not 0 <= slot < len(convs[suite]):
                keyed = []
                break
            keyed.append((RequestKey(slot, prompt_digest(convs[suite][slot]),
                                     params.seed + index if seeded else None), unit))
        if keyed:
            out[(config, name)] = keyed
    return out


def infer_keys(p: MatrixParams, cell: Cell, n_requests: int, digest: str | None
               ) -> tuple[RequestKey, ...] | None:
    """The keys of a cell stored without them, where they are certain: a single-turn built-in
    prompt set whose prompts are those the file's digest names, and one request per slot (so
    none failed: the bench client stores a cell's requests in index order, and request i is
    slot i with seed base + i). Otherwise None (the gate tests the cell unpaired)."""
    if p.dataset or cell.suite not in matrix.BUILTIN or n_requests != p.num_prompts:
        return None
    try:
        convs = matrix.conversations(p, cell.suite)
        now = prompts_digest(p).get(cell.suite)
    except (SpecdoctorError, KeyError, ValueError):
        return None
    if digest is None or now != digest or any(len(conv) != 1 for conv in convs):
        return None
    seeded = cell.sampling == "official" and p.official_temperature > 0
    return tuple(RequestKey(i, prompt_digest(convs[i]), p.seed + i if seeded else None)
                 for i in range(n_requests))


def from_run(rows: Sequence[Row], run_id: int, kind: str, created_at: float,
             params: MatrixParams, configs: Sequence[dict[str, Any]], config: str | None = None,
             name: str | None = None, keyed: KeyedUnits | None = None) -> Baseline:
    """A baseline from a recorded bench run: its speculative configuration (``config`` when the
    run has several), its cells recorded as ok, and its spec-off cells as the speed reference."""
    spec = [c for c in configs if c.get("role", "config") != "baseline"]
    labels = [c["label"] for c in spec]
    if config is None:
        if len(spec) != 1:
            raise InputError(f"bench run {run_id} has {len(spec)} speculative configurations "
                             f"({', '.join(labels) or 'none'})",
                             "pick one with --config LABEL" if spec else
                             "save a run of a server with speculation on")
        chosen = spec[0]
    else:
        found = [c for c in spec if c["label"] == config]
        if not found:
            raise InputError(f"bench run {run_id} has no configuration {config!r}",
                             f"choose one of: {', '.join(labels)}")
        chosen = found[0]
    pairs = cell_samples(rows, chosen["label"], keyed)
    if not pairs:
        raise InputError(f"bench run {run_id} has no cell of {chosen['label']} recorded as ok",
                         f"finish it first: specdoctor bench --resume {run_id}")
    off = next((c for c in configs if c.get("role") == "baseline"), None)
    target = {"label": chosen["label"], "command": chosen.get("command"),
              "url": chosen.get("url"), "spec_off_command": off.get("command") if off else None}
    return Baseline(name, _iso(time.time()),
                    {"bench_run": run_id, "kind": kind, "measured_at": _iso(created_at)},
                    target, params, prompts_digest(params),
                    [BaselineCell(cell, sample) for cell, sample in pairs])


def prompts_digest(p: MatrixParams) -> dict[str, str]:
    """sha256 of each prompt set's requests as a cell sends them (texts and turns, in order)."""
    return {s: hashlib.sha256(json.dumps(matrix.conversations(p, s)).encode()).hexdigest()
            for s in p.suites}


def check_prompts(b: Baseline, p: MatrixParams) -> None:
    """Refuse to gate on prompts other than the baseline's (changed built-in prompts, another
    dataset file)."""
    try:
        now = prompts_digest(p)
    except SpecdoctorError as exc:
        raise InputError(f"cannot read the baseline's prompts: {exc.problem}",
                         f"the baseline was measured on dataset {p.dataset}; put that file "
                         "there, or measure a new baseline") from exc
    for suite in p.suites:
        if b.prompts_sha256.get(suite) not in (None, now[suite]):
            raise InputError(f"the prompts of '{suite}' differ from the baseline's (this "
                             "specdoctor's built-in prompts changed, or the dataset file did)",
                             "gate with the specdoctor version and dataset of the baseline, "
                             "or measure a new baseline")


# ---- JSON --------------------------------------------------------------------------------

def _cell_json(c: BaselineCell) -> dict[str, Any]:
    s = c.sample
    profile = s.profile
    if s.units:
        profile = with_bootstrap(sum_profiles(s.units), s.units, "requests")
    return {"cell": s.cell, "suite": c.cell.suite, "sampling": c.cell.sampling,
            "concurrency": c.cell.concurrency, "k": s.k,
            "requests": [_unit_json(u) for u in s.units] if s.units else None,
            **({"request_keys": [k.to_json() for k in s.keys]} if s.keys else {}),
            "profile": profile.to_json() if profile is not None else None,
            "tok_s": s.tok_s.to_json() if s.tok_s else None,
            "spec_off_tok_s": s.spec_off_tok_s.to_json() if s.spec_off_tok_s else None}


def _unit_json(u: AcceptanceProfile) -> list[Any]:
    return [u.drafts, u.draft_tokens, u.accepted_tokens, list(u.accepted_per_position or [])]


def dumps(b: Baseline) -> str:
    return json.dumps(b.to_json(), indent=1) + "\n"


def write_file(b: Baseline, path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(dumps(b), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}", "pick a writable path") from exc


def load_file(path: Path) -> Baseline:
    try:
        text = read_limited(path, "baseline file", MAX_CONFIG, "--baseline").decode("utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the baseline {path}: {exc.strerror}", EXPORT_FIX) from exc
    except UnicodeDecodeError:
        raise InputError(f"{path} is not a baseline file (binary, not UTF-8 JSON)",
                         EXPORT_FIX) from None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path} is not JSON ({exc})", EXPORT_FIX) from None
    return from_json(doc, str(path))


def from_json(doc: Any, where: str = "the baseline") -> Baseline:
    """A validated Baseline; any problem is an InputError naming the field and the fix."""
    r = _Reader(where)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise InputError(f"{where} is not a specdoctor gate baseline (its 'schema' is not "
                         f"{SCHEMA!r})", EXPORT_FIX)
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        r.fail("version", "is not a positive integer")
    if version > VERSION:
        raise InputError(f"{where} is a version {version} baseline; this specdoctor "
                         f"({__version__}) reads version {VERSION}",
                         "upgrade specdoctor, or export the baseline again with this one")
    params = _matrix(r, doc.get("matrix"))
    cells_doc = doc.get("cells")
    if not isinstance(cells_doc, list) or not cells_doc:
        r.fail("cells", "is not a non-empty list")
    digests = doc.get("prompts_sha256") or {}
    if not isinstance(digests, dict) or not all(isinstance(v, str) for v in digests.values()):
        r.fail("prompts_sha256", "is not an object of strings")
    cells = [_cell(r, f"cells[{i}]", c, params, digests) for i, c in enumerate(cells_doc)]
    names = [c.sample.cell for c in cells]
    if len(set(names)) != len(names):
        r.fail("cells", "names a cell twice")
    for key in ("source", "target"):
        if not isinstance(doc.get(key, {}), dict):
            r.fail(key, "is not an object")
    name = doc.get("name")
    return Baseline(name if isinstance(name, str) else None, str(doc.get("saved_at", "")),
                    dict(doc.get("source") or {}), dict(doc.get("target") or {}), params,
                    dict(digests), cells, version)


class _Reader:
    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, field: str, problem: str) -> Any:
        raise InputError(f"{self.where}: {field} {problem}",
                         "the file was changed by hand or is damaged; " + EXPORT_FIX)


def _matrix(r: _Reader, d: Any) -> MatrixParams:
    if not isinstance(d, dict):
        r.fail("matrix", "is not an object")
    known = set(MatrixParams.__dataclass_fields__)
    unknown = sorted(set(d) - known)
    if unknown:
        r.fail("matrix", f"has unknown fields {unknown}")
    try:
        p = MatrixParams.from_json(d)
        if not p.dataset:  # a dataset file is looked for when the gate runs, not here
            matrix.check(p)
    except (TypeError, KeyError, ValueError) as exc:
        r.fail("matrix", f"is not a benchmark matrix ({exc})")
    except InputError as exc:
        r.fail("matrix", f"is not usable: {exc.problem}")
    return p


def _int(r: _Reader, field: str, x: Any) -> int:
    if not isinstance(x, int) or isinstance(x, bool) or x < 0:
        r.fail(field, f"is {x!r}, not a count")
    return int(x)


def _cell(r: _Reader, field: str, d: Any, params: MatrixParams,
          digests: dict[str, str]) -> BaselineCell:
    if not isinstance(d, dict):
        r.fail(field, "is not an object")
    for key, kind in (("cell", str), ("suite", str), ("sampling", str)):
        if not isinstance(d.get(key), kind):
            r.fail(f"{field}.{key}", "is missing or not a string")
    cell = Cell(d["suite"], d["sampling"], _int(r, f"{field}.concurrency", d.get("concurrency")))
    if cell.name != d["cell"]:
        r.fail(f"{field}.cell", f"is {d['cell']!r} but its suite, sampling and concurrency make "
                                f"{cell.name!r}")
    k = d.get("k")
    if k is not None:
        k = _int(r, f"{field}.k", k)
    units = None
    if d.get("requests") is not None:
        if not isinstance(d["requests"], list):
            r.fail(f"{field}.requests", "is not a list")
        units = tuple(_unit(r, f"{field}.requests[{i}]", u, k)
                      for i, u in enumerate(d["requests"]))
    profile = _profile(r, f"{field}.profile", d.get("profile"), k)
    if units and profile is not None:
        total = sum_profiles(units)
        if (total.drafts, total.draft_tokens, total.accepted_tokens) != (
                profile.drafts, profile.draft_tokens, profile.accepted_tokens) or (
                profile.accepted_per_position is not None
                and total.accepted_per_position != profile.accepted_per_position):
            r.fail(f"{field}.profile", "does not equal the sum of the cell's requests")
    elif units:
        profile = sum_profiles(units)
    keys = None
    if units and d.get("request_keys") is not None:
        keys = _keys(r, f"{field}.request_keys", d["request_keys"], len(units))
    elif units:
        keys = infer_keys(params, cell, len(units), digests.get(cell.suite))
    return BaselineCell(cell, CellSample(cell.name, k, units, profile,
                                         _spread(r, f"{field}.tok_s", d.get("tok_s")),
                                         _spread(r, f"{field}.spec_off_tok_s",
                                                 d.get("spec_off_tok_s")), keys))


def _keys(r: _Reader, field: str, d: Any, n: int) -> tuple[RequestKey, ...]:
    if not isinstance(d, list) or len(d) != n:
        r.fail(field, f"is not a list of {n} keys, one per request")
    out = []
    for i, k in enumerate(d):
        if (not isinstance(k, list) or len(k) != 3 or not isinstance(k[1], str)
                or (k[2] is not None and (not isinstance(k[2], int) or isinstance(k[2], bool)))):
            r.fail(f"{field}[{i}]", "is not [slot, prompt, seed or null]")
        out.append(RequestKey(_int(r, f"{field}[{i}]", k[0]), k[1], k[2]))
    return tuple(out)


def _unit(r: _Reader, field: str, u: Any, k: int | None) -> AcceptanceProfile:
    if not isinstance(u, list) or len(u) != 4 or not isinstance(u[3], list):
        r.fail(field, "is not [drafts, draft_tokens, accepted, [accepted per position]]")
    drafts, draft_tokens, accepted = (_int(r, field, x) for x in u[:3])
    per_pos = tuple(_int(r, field, x) for x in u[3])
    if accepted > draft_tokens or any(a > drafts for a in per_pos):
        r.fail(field, "accepts more than it drafted")
    return AcceptanceProfile(drafts, draft_tokens, accepted, per_pos or None, k)


def _profile(r: _Reader, field: str, d: Any, k: int | None) -> AcceptanceProfile | None:
    if d is None:
        return None
    if not isinstance(d, dict):
        r.fail(field, "is not an object")
    counts = [d.get(key) for key in ("drafts", "draft_tokens", "accepted_tokens")]
    drafts, draft_tokens, accepted = (
        None if x is None else _int(r, field, x) for x in counts)
    pos = d.get("accepted_per_position")
    per_pos = None if pos is None else tuple(_int(r, field, x) for x in pos)
    return AcceptanceProfile(drafts, draft_tokens, accepted, per_pos, k)


def _spread(r: _Reader, field: str, d: Any) -> Spread | None:
    if d is None:
        return None
    try:
        s = Spread(float(d["value"]), float(d["low"]), float(d["high"]), str(d["basis"]))
    except (TypeError, KeyError, ValueError):
        r.fail(field, "is not {value, low, high, basis}")
    if not s.low <= s.high or s.value < 0:
        r.fail(field, "has low above high, or a negative value")
    return s


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
