"""Every command, every option, hostile values: what the CLI does with them, in-process.

For each command of the real CLI (read from click, so a new command or option is fuzzed with no
change here), each parameter is given values of its kind in turn, on top of a base command line
that is otherwise valid:

- integers: 10**30, -10**30, -1, 0; floats: the same and nan, inf, 1e309;
- strings: "", "banana", 10**30, ",,", "-1";
- files (path parameters and string arguments): a missing path, an empty file, a binary file, a
  file of NUL bytes, a directory, a JSON file of the wrong shape, plain text;
- model directories (``--target`` and its kin): garbage safetensors, a bad ``rope_scaling``,
  no tokenizer;
- ids: 10**30 where a run or investigation id goes.

The command runs as ``specdoctor.cli.main.main(argv)`` does for a user, with nothing started:
any attempt to start a server, or the oracle's first simulated request (its models loaded and
its inputs read, so every file it was handed was checked), raises ``WouldStart`` (the input was
accepted), so the fuzz boots nothing and simulates nothing. Run as ``python -m tests.cli.fuzz
CMD`` it prints one JSON line per case; tests/cli/test_fuzz.py runs it under a memory limit
and judges the lines.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "vllm" / "lab-draft_model-k4"
GATE_BASELINE = ROOT / "tests" / "fixtures" / "gate" / "demo-baseline.json"  # a real export
HUGE = str(10 ** 30)
DEAD = "http://127.0.0.1:9"  # nothing listens on the discard port: refused at once
INTS = (HUGE, "-" + HUGE, "-1", "0")
FLOATS = (HUGE, "-1", "0", "nan", "inf", "1e309")
STRINGS = ("", "banana", HUGE, ",,", "-1")
FILES = ("missing", "empty", "binary", "nul", "directory", "json", "text")
MODELS = ("garbage-safetensors", "bad-rope", "no-tokenizer")
MODEL_PARAMS = {"target", "draft", "tokenizer", "target_dir", "draft_dir", "model_dir"}
INTERNAL_MARK = "internal error:"
# Per command: the base command line (valid but for the parameter fuzzed), and the values a
# parameter must not get because they are valid and start real work (a 4-rank torch run).
SKIP: dict[tuple[str, ...], dict[str, set[str]]] = {
    ("taps", "case-b"): {"directory": {"missing", "directory"}},
}
SLOW_S = 120


class WouldStart(BaseException):
    """A server was about to start: the command accepted its input."""


class Hung(BaseException):
    """The command ran past SLOW_S."""


@dataclass
class Outcome:
    argv: list[str]
    param: str
    value: str
    code: int | None
    traceback: str | None
    stderr: str
    seconds: float

    @property
    def internal(self) -> bool:
        return INTERNAL_MARK in self.stderr


def hostile_files(root: Path) -> dict[str, Path]:
    """One file (or directory) of each hostile kind under ROOT."""
    root.mkdir(parents=True, exist_ok=True)
    f = {name: root / name for name in (*FILES, *MODELS)}
    f["empty"].write_bytes(b"")
    f["binary"].write_bytes(bytes(range(256)) * 40)
    f["nul"].write_bytes(b"\0" * 8192)
    f["directory"].mkdir(exist_ok=True)
    f["json"].write_text('{"unexpected": [1, 2, 3]}\n')
    f["text"].write_text("hello\nworld\n")
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
           "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
           "intermediate_size": 128, "vocab_size": 1024, "max_position_embeddings": 256}
    for name in MODELS:
        f[name].mkdir(exist_ok=True)
    (f["garbage-safetensors"] / "config.json").write_text(json.dumps(cfg))
    # a header length far past the file, then bytes that are no JSON
    (f["garbage-safetensors"] / "model.safetensors").write_bytes(struct.pack("<Q", 10 ** 12) + b"\xff" * 64)
    (f["bad-rope"] / "config.json").write_text(json.dumps({**cfg, "rope_scaling": "banana"}))
    _tiny_weights(f["bad-rope"] / "model.safetensors", cfg)
    _tiny_tokenizer(f["bad-rope"])
    (f["no-tokenizer"] / "config.json").write_text(json.dumps(cfg))
    _tiny_weights(f["no-tokenizer"] / "model.safetensors", cfg)
    f["missing"] = root / "no-such-file"
    return f


def _tiny_weights(path: Path, cfg: dict) -> None:
    """A well-formed safetensors file (one tensor, zeros) without any tokenizer beside it."""
    n = cfg["vocab_size"] * cfg["hidden_size"]
    header = json.dumps({"model.embed_tokens.weight": {"dtype": "F32", "shape": [cfg["vocab_size"], cfg["hidden_size"]],
                                                       "data_offsets": [0, 4 * n]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * (4 * n))


@dataclass
class Base:
    """A command line in parts: positional arguments, options, and what follows ``--``."""

    args: list[str]
    opts: list[str]
    tail: list[str]

    def argv(self) -> list[str]:
        return [*self.args, *self.opts, *(["--", *self.tail] if self.tail else [])]


def _tiny_tokenizer(d: Path) -> None:
    """A word-level tokenizer that loads (so a model directory fails on its config, not here)."""
    vocab = {"<unk>": 0, "a": 1, "b": 2}
    (d / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None,
        "decoder": None, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}}))
    (d / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>"}))


def base_argv(path: tuple[str, ...], f: dict[str, Path], out: Path) -> Base:
    """A command line of PATH that is valid, cheap, and starts nothing."""
    log, dump = str(FIXTURES / "server.log"), str(FIXTURES / "metrics_3_final.txt")
    pyfile = out / "mod.py"
    pyfile.write_text("def f():\n    return 1\n")
    d = str(f["directory"])
    table: dict[tuple[str, ...], tuple[list[str], list[str], list[str]]] = {
        ("logs",): ([log], ["--no-store"], []),
        ("metrics",): ([dump], ["--no-store"], []),
        ("measure",): ([], ["--url", DEAD, "--no-store"], []),
        ("recon", "extract"): ([d], ["-o", str(out / "snap")], []),
        ("recon", "diff"): ([d, d], [], []),
        ("astexec",): ([str(pyfile), "f"], ["--call", "f()"], []),
        ("kernels", "check"): ([], ["--impl", "sdpa", "--suite", "smoke"], []),
        ("taps", "check"): ([d], [], []),
        ("taps", "case-b"): ([str(f["text"])], [], []),
        ("oracle",): ([], ["--target", d, "--method", "ngram", "-n", "2", "--max-tokens", "4",
                           "--no-store"], []),
        ("probe", "build"): (["startup"], ["-o", str(out / "pack")], []),
        ("probe", "run"): (["startup"], ["--quiet"], ["true"]),
        ("probe", "lines"): ([log], [], []),
        ("audit", "models"): ([d, d], [], []),
        ("audit", "launch"): ([], ["--k", "4"], []),
        ("cache", "scan"): ([d], [], []),
        ("cache", "ab"): ([], ["--port", "9"], ["true"]),
        ("bench",): ([], ["--url", DEAD, "--no-report"], []),
        ("sweep",): ([], ["--launch", "vllm serve m --speculative-config "
                          "'{\"method\": \"ngram\", \"num_speculative_tokens\": 2}'",
                          "--no-report"], []),
        ("diagnose",): ([], ["--logs", log, "--no-store", "--out", str(out / "diag")], []),
        ("gate",): ([], ["--baseline", str(GATE_BASELINE), "--url", DEAD], []),
        ("ledger", "show"): (["1"], [], []),
        ("report",): (["1"], [], []),
    }
    args, opts, tail = table.get(path, ([], [], []))
    return Base(list(args), list(opts), list(tail))


# Values of one parameter's own grammar, beside those of its kind.
EXTRA: dict[str, tuple[str, ...]] = {
    "ctx": ("0..100000000", "100000000..100000001", "5..2"),
}


def values_for(param: click.Parameter, f: dict[str, Path]) -> Iterator[tuple[str, str]]:
    """(label, value) pairs of hostile values of PARAM's kind."""
    yield from ((v, v) for v in EXTRA.get(param.name or "", ()))
    t = param.type
    if isinstance(t, click.Choice) or getattr(param, "is_flag", False) or \
            isinstance(t, click.types.UnprocessedParamType):
        return
    if isinstance(t, (click.types.IntParamType, click.IntRange)):
        yield from ((v, v) for v in INTS)
    elif isinstance(t, (click.types.FloatParamType, click.FloatRange)):
        yield from ((v, v) for v in FLOATS)
    elif isinstance(t, click.types.BoolParamType):
        yield ("maybe", "maybe")
    elif isinstance(t, click.Path) or isinstance(param, click.Argument):
        yield from ((k, str(f[k])) for k in FILES)
        if param.name in MODEL_PARAMS:
            yield from ((k, str(f[k])) for k in MODELS)
        if isinstance(param, click.Argument) and not isinstance(t, click.Path):
            yield from ((v, v) for v in STRINGS)
    else:
        yield from ((v, v) for v in STRINGS)
        if param.name in ("suite", "dataset", "spec_ref", "patches", "source", "file",
                          "baseline_ref"):
            yield from ((k, str(f[k])) for k in FILES)


def with_value(base: Base, param: click.Parameter, index: int, value: str) -> list[str]:
    """BASE with PARAM set to VALUE: the INDEXth argument replaced, or the option replaced."""
    if isinstance(param, click.Argument):
        args = list(base.args)
        args[index:index + 1] = [value]
        return Base(args, base.opts, base.tail).argv()
    opts, skip = [], False
    for a in base.opts:
        if skip:
            skip = False
        elif a in param.opts:
            skip = True
        else:
            opts.append(a)
    return Base(base.args, [*opts, max(param.opts, key=len), value], base.tail).argv()


def cases(top: str, out: Path) -> Iterator[tuple[tuple[str, ...], str, str, list[str]]]:
    from tests.cli.clitree import commands

    f = hostile_files(out / "hostile")
    for path, cmd in commands().items():
        if not path or path[0] != top or isinstance(cmd.command, click.Group):
            continue
        base = base_argv(path, f, out)
        args = [p for p in cmd.command.params if isinstance(p, click.Argument)]
        for param in cmd.command.params:
            skip = SKIP.get(path, {}).get(param.name or "", set())
            index = args.index(param) if param in args else -1
            for label, value in values_for(param, f):
                if label in skip:
                    continue
                yield path, param.name or "", label, [*path, *with_value(base, param, index, value)]
    ids = {"runs": [["runs", HUGE]], "ledger": [["ledger", "show", HUGE]],
           "report": [["report", HUGE]], "oracle": [["oracle", "--compare", HUGE, "--no-store"]],
           "bench": [["bench", "--resume", HUGE]],
           "gate": [["gate", "--save", "x", HUGE], ["gate", "--export", HUGE, str(out / "b.json")],
                    ["gate", "--baseline", HUGE, "--url", DEAD]]}
    for argv in ids.get(top, []):
        yield (top,), "id", "huge-id", argv


def run(argv: list[str], cwd: Path) -> tuple[int | None, str | None, str]:
    """Run ``main(argv)`` as the console script does; (exit code, traceback or None, stderr)."""
    from click.testing import CliRunner

    from specdoctor.cli.main import main

    code: int | None = None
    tb = None
    old = os.getcwd()
    os.chdir(cwd)
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SLOW_S)
    try:
        with CliRunner().isolation(input=b"") as (_out, err, _mixed):
            try:
                main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except WouldStart:
                code = 0
            except Hung:
                tb = f"ran past {SLOW_S} s"
            except BaseException:  # noqa: BLE001 — this is what the fuzz looks for
                tb = traceback.format_exc()
            stderr = err.getvalue().decode("utf-8", "replace")
    finally:
        signal.alarm(0)
        os.chdir(old)
    return code, tb, stderr


def _alarm(_sig: int, _frame: object) -> None:
    raise Hung()


def _would_start(*_a: object, **_k: object) -> None:
    raise WouldStart()


def main(top: str) -> None:
    from specdoctor import launch
    from specdoctor.launch import servers
    from specdoctor.oracle import runner

    # every server start goes through launch/servers.start (launch, running, Servers, the lab)
    launch.start = servers.start = _would_start  # nothing boots in the fuzz
    # nor is any request simulated: what the oracle was handed is read before its first request
    runner.run_request = _would_start
    os.environ["SPECDOCTOR_TRACEBACK"] = ""
    with tempfile.TemporaryDirectory(prefix="specdoctor-fuzz-") as tmp:
        out = Path(tmp)
        os.environ["SPECDOCTOR_HOME"] = str(out / "home")
        os.environ["SPECDOCTOR_DB"] = str(out / "store.db")
        for path, param, label, argv in cases(top, out):
            t0 = time.perf_counter()
            code, tb, stderr = run(argv, out)
            o = Outcome(argv, f"{' '.join(path)} {param}", label, code, tb, stderr[-1500:],
                        round(time.perf_counter() - t0, 2))
            print(json.dumps({**asdict(o), "internal": o.internal}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
