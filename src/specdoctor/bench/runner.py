"""Run a benchmark plan: configurations × matrix cells × repeats, recorded cell by cell.

A configuration is either a server already running (``url``) or a ``LaunchSpec`` that the
runner starts itself (on a free port, with its own device set when ``devices`` are given),
waits for, benchmarks and stops. Repeats interleave configurations (A B A B …) so drift on a
noisy machine falls on every configuration alike. With several device sets, configurations of
one repeat run side by side, one per set; tensor/data parallelism stays the engine's job.

Failures never lose data: a launch that never becomes ready fails its cells with the log tail;
a server that dies fails the cell in flight (its finished requests kept) and the next cells of
that configuration; the plan continues. ``resume`` reruns only the cells not recorded as ok.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdoctor.bench import cell as cellmod
from specdoctor.bench.client import Outcome
from specdoctor.bench.matrix import Cell, MatrixParams
from specdoctor.errors import SpecdoctorError
from specdoctor.launch import servers
from specdoctor.launch.servers import READY_TIMEOUT_S
from specdoctor.launch.spec import LaunchSpec
from specdoctor.store.bench import BenchStore


@dataclass(frozen=True)
class Config:
    label: str
    role: str = "config"  # "config" | "baseline"
    url: str | None = None
    spec: LaunchSpec | None = None

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "role": self.role, "url": self.url,
                "spec": self.spec.to_json() if self.spec else None,
                "command": self.spec.shell_command() if self.spec else None}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Config:
        return cls(d["label"], d.get("role", "config"), d.get("url"),
                   LaunchSpec.from_json(d["spec"]) if d.get("spec") else None)


@dataclass
class Plan:
    kind: str
    params: MatrixParams
    configs: list[Config]
    repeat: int = 1
    devices: list[str] = field(default_factory=list)  # one entry per concurrent launch
    ready_timeout_s: float = READY_TIMEOUT_S
    log_dir: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {"matrix": self.params.to_json(), "repeat": self.repeat, "devices": self.devices,
                "ready_timeout_s": self.ready_timeout_s}


def cell_key(config: str, cell: Cell, rep: int) -> str:
    return f"{config}|{cell.name}|r{rep}"


class Events:
    """What the runner tells the console (all no-ops by default)."""

    def launching(self, config: Config, spec: LaunchSpec) -> None: ...
    def ready_tick(self, config: Config, elapsed: float, line: str) -> None: ...
    def cell_started(self, config: Config, cell: Cell, rep: int, total: int) -> None: ...
    def request_done(self, config: Config, cell: Cell, rep: int, o: Outcome) -> None: ...
    def cell_done(self, config: Config, cell: Cell, rep: int, result: dict[str, Any]) -> None: ...


def start_run(store: BenchStore, plan: Plan) -> int:
    return store.new_run(plan.kind, plan.to_json(), [c.to_json() for c in plan.configs])


def load_plan(store: BenchStore, run_id: int, log_dir: Path | None = None) -> Plan:
    r = store.run(run_id)
    return Plan(r.kind, MatrixParams.from_json(r.params["matrix"]),
                [Config.from_json(c) for c in r.configs], int(r.params.get("repeat", 1)),
                list(r.params.get("devices") or []), float(r.params.get("ready_timeout_s", READY_TIMEOUT_S)),
                log_dir)


def execute(store: BenchStore, run_id: int, plan: Plan, events: Events | None = None) -> str:
    """Run every cell not yet recorded as ok; returns the run's status (ok | partial)."""
    ev = events or Events()
    done = {c.key for c in store.cells(run_id) if c.status == "ok"}
    lock = threading.Lock()
    slots = plan.devices or [""]
    for rep in range(plan.repeat):
        jobs = [(cfg, [c for c in plan.params.cells() if cell_key(cfg.label, c, rep) not in done])
                for cfg in plan.configs]
        jobs = [(cfg, cells) for cfg, cells in jobs if cells]
        if len(slots) == 1:
            for cfg, cells in jobs:
                _run_config(store, run_id, plan, cfg, cells, rep, slots[0], ev, lock)
            continue
        pool_slots = _Slots(slots)

        def job(cfg: Config, cells: list[Cell], rep: int = rep, pool_slots: _Slots = pool_slots
                ) -> None:
            slot = pool_slots.take()
            try:
                _run_config(store, run_id, plan, cfg, cells, rep, slot, ev, lock)
            finally:
                pool_slots.give(slot)

        with ThreadPoolExecutor(max_workers=len(slots)) as pool:
            for f in [pool.submit(job, cfg, cells) for cfg, cells in jobs]:
                f.result()
    cells = store.cells(run_id)
    status = "ok" if len([c for c in cells if c.status == "ok"]) == \
        plan.repeat * len(plan.configs) * len(plan.params.cells()) else "partial"
    store.set_status(run_id, status)
    return status


class _Slots:
    """Device sets handed to concurrent launches: one set per running configuration."""

    def __init__(self, slots: Sequence[str]) -> None:
        self.free = list(slots)
        self.cond = threading.Condition()

    def take(self) -> str:
        with self.cond:
            self.cond.wait_for(lambda: bool(self.free))
            return self.free.pop(0)

    def give(self, slot: str) -> None:
        with self.cond:
            self.free.append(slot)
            self.cond.notify()


def _run_config(store: BenchStore, run_id: int, plan: Plan, cfg: Config, cells: Sequence[Cell],
                rep: int, slot: str, ev: Events, lock: threading.Lock) -> None:
    handle = None
    extra: dict[str, Any] = {}
    try:
        if cfg.spec is not None:
            spec = cfg.spec.with_port(servers.free_port())
            if slot:
                spec = spec.with_devices(slot)
            extra = {"command": spec.shell_command(), "env": spec.env, "argv": list(spec.argv),
                     "devices": slot or None, "launched_at": time.time()}
            ev.launching(cfg, spec)
            log_dir = plan.log_dir or Path(store.path).parent / "bench-logs"
            log = log_dir / f"run{run_id}-{_safe(cfg.label)}-r{rep}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_bytes(b"")
            try:
                handle = servers.launch(spec, log, plan.ready_timeout_s,
                                        on_tick=lambda t, line: ev.ready_tick(cfg, t, line))
                extra["ready_at"] = time.time()
            except SpecdoctorError as exc:
                for c in cells:
                    res = {"cell": c.name, "status": "failed", "requests_sent": 0, "requests_ok": 0,
                           "error": f"launch failed: {exc.problem}", "failures": {}, **extra}
                    _put(store, run_id, cfg, c, rep, res, lock)
                    ev.cell_done(cfg, c, rep, res)
                return
            url = spec.url
        else:
            url = cfg.url or ""
        model = plan.params.model or cellmod.served_model(url) or "default"
        gone: str | None = None
        for c in cells:
            ev.cell_started(cfg, c, rep, plan.params.num_prompts)
            if gone is not None:
                res = {"cell": c.name, "status": "failed", "error": gone, "requests_sent": 0,
                       "requests_ok": 0, "failures": {}, **extra}
            else:
                res = cellmod.run_cell(url, plan.params, c, model,
                                       on_done=lambda o, c=c: ev.request_done(cfg, c, rep, o),
                                       alive=handle.alive if handle else None)
                res.update(extra)
                if res["status"] == "failed" and handle is not None and not handle.alive():
                    res["error"] += f"; server log tail:\n{servers.tail(handle.log_path, 8)}"
                    gone = f"not run: the server of {cfg.label} died in an earlier cell"
                elif res["status"] == "failed" and any(
                        w in (res["error"] or "") for w in ("stopped answering", "unreachable")):
                    gone = f"not run: {cfg.label} stopped answering in an earlier cell"
            _put(store, run_id, cfg, c, rep, res, lock)
            ev.cell_done(cfg, c, rep, res)
    finally:
        if handle is not None:
            servers.stop(handle)


def _put(store: BenchStore, run_id: int, cfg: Config, c: Cell, rep: int, res: dict[str, Any],
         lock: threading.Lock) -> None:
    res = {**res, "config": cfg.label, "role": cfg.role, "rep": rep}
    with lock:
        store.put_cell(run_id, cell_key(cfg.label, c, rep), config=cfg.label, suite=c.suite,
                       sampling=c.sampling, concurrency=c.concurrency, rep=rep,
                       status=res["status"], error=res.get("error"), result=res)


def _safe(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_=." else "_" for ch in label)[:60]

