"""The clinic is blind: nothing a case's server is given or can read names its answer.

Every case of ``benchmarks/clinic/run.py`` is built as the clinic builds it (the lab's drafters at
the ``ci`` budget, so the models are cheap), and everything the server or ``diagnose`` could
read is searched: every path and file name under the case's folder, the content of every text
file there (configs, tokenizer files, patch packs), the header of every safetensors file, the
environment (names and values) and the full ``specdoctor diagnose`` argv. Forbidden: any case
name, lab fault id, patch or probe-pack name (both spellings), the lab's build records and
config-key prefix, a training key in a served config, and the upstream report numbers the
cases cite. No server is started.

Building every case at the ``ci`` budget trains what the models cache lacks (the lab's drafters,
an MTP layer unrolled twice): minutes on a fresh machine, seconds once the cache holds them.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

CLINIC = Path(__file__).resolve().parents[3] / "benchmarks" / "clinic"
sys.path.insert(0, str(CLINIC))

import patients  # noqa: E402
import run  # noqa: E402
from specdoctor.packs import shipped  # noqa: E402
from specdoctor.lab import faults, patches  # noqa: E402

CASES = {c.name: c for c in run.CASES}


def shipped_patches() -> set[str]:
    """Shipped probe packs that patch the engine (a ``replace`` entry), as the clinic's
    ``patched`` cases serve them; the probes (``startup``, ``dflash``…) are ordinary words."""
    from specdoctor.packs import spec as specmod

    return {name for name, path in shipped.available().items()
            if any(p.replace for p in specmod.load(path).probes)}


def forbidden_words() -> set[str]:
    names = {c.name for c in run.CASES} | set(faults.FAULTS) | set(patches.available())
    names |= shipped_patches()
    words = set()
    for n in names:
        words |= {n, n.replace("-", "_")}
    return words | {"specdoctor-build", "specdoctor-train", "specdoctor-recipe"}


def cited_numbers() -> set[str]:
    return {m for c in run.CASES for m in re.findall(r"#(\d{3,})", c.cite)}


HF_KEYS_WITH_TRAIN = {"pretraining_tp"}  # a transformers key, not the lab's


def config_keys(cfg: object) -> list[str]:
    """Every key of a config, nested ones too."""
    if isinstance(cfg, dict):
        return [k for k in cfg] + [x for v in cfg.values() for x in config_keys(v)]
    if isinstance(cfg, list):
        return [x for v in cfg for x in config_keys(v)]
    return []


def safetensors_header(f: Path) -> str:
    raw = f.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return raw[8:8 + n].decode("utf-8", "replace")


def what_is_visible(case: run.Case, tmp: Path) -> tuple[str, str]:
    """(everything visible, the text part of it): paths, names, file contents, env, argv."""
    setup = case.build(tmp)
    _, argv = run.diagnose_args(setup, tmp, 10.0)
    parts: list[str] = list(argv)
    text: list[str] = list(argv)
    for f in sorted(tmp.rglob("*")):
        parts.append(str(f))
        if not f.is_file():
            continue
        if f.suffix == ".safetensors":
            parts.append(safetensors_header(f))
            continue
        content = f.read_bytes().decode("latin-1")
        parts.append(content)
        text.append(content)
    env = patients.launch_env(setup, tmp)
    parts += [*env, *env.values()]
    text += [*env, *env.values()]
    return "\n".join(parts), "\n".join(text)


@pytest.fixture(scope="module", autouse=True)
def ci_drafters():
    before = patients.DRAFTER_BUDGET[0]
    patients.DRAFTER_BUDGET[0] = "ci"
    yield
    patients.DRAFTER_BUDGET[0] = before


def _cases() -> list:
    """Every case; llama-server's marked llamacpp (run last, after the test job's build)."""
    import llamacpp_cases

    llama = {c.name for c in llamacpp_cases.LLAMACPP_CASES}
    return [pytest.param(n, marks=pytest.mark.llamacpp) if n in llama else n for n in CASES]


@pytest.mark.parametrize("name", _cases())
def test_nothing_a_case_serves_names_its_answer(name, request):
    if "llamacpp" in request.keywords:
        from tests.conftest import llamacpp_missing

        why = llamacpp_missing()
        if why is not None:
            pytest.skip(why)
    tmp = Path(tempfile.mkdtemp(prefix="srv-"))  # as the clinic names it, not after the test
    try:
        check_case(name, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_case(name: str, tmp: Path) -> None:
    seen, text = what_is_visible(CASES[name], tmp)
    for word in sorted(forbidden_words()):
        assert word not in seen, f"{word!r} is visible in case {name}"
    for number in sorted(cited_numbers()):
        assert not re.search(rf"#{number}(?!\d)", text), f"#{number} is visible in {name}"
    for cfg in tmp.rglob("config.json"):
        keys = [k for k in config_keys(json.loads(cfg.read_text()))
                if ("train" in k.lower() and k not in HF_KEYS_WITH_TRAIN)
                or k.startswith(patients.LAB_PREFIX)]
        assert not keys, f"lab or training keys in {cfg} of {name}: {keys}"
    for pack in tmp.rglob("pack.json"):
        config = json.loads(pack.read_text())
        assert re.fullmatch(r"[0-9a-f]{16}", config["name"]), config["name"]
        assert config["gate"] == patients.GATE and config["sink_env"] == patients.SINK
        for f in pack.parent.glob("*.py"):
            assert '"""' not in f.read_text() or f.name in ("sitecustomize.py",
                                                           "_specdoctor_probe_runtime.py"), f


def test_every_case_has_a_category_and_every_upstream_case_a_citation_and_a_twin():
    for c in run.CASES:
        assert c.category in patients.CATEGORIES, c.name
        assert (c.root_cause is None) == (c.category in ("healthy", "benign")), c.name
        if c.origin == "upstream":
            assert c.cite and c.upstream and c.how and c.twin, c.name
    assert len([c for c in run.CASES if c.origin == "upstream"]) >= 8


def test_a_patch_named_in_a_served_file_is_caught(tmp_path):
    """The search bites: a pack built the plain way (its own names, its docstrings) fails it."""
    from specdoctor.packs import spec as specmod
    from specdoctor.packs.build import build

    built = build(specmod.load(patches.DIR / "eagle-norm.toml"), tmp_path / "site0")
    seen = "\n".join([str(p) for p in built.dir.rglob("*")]
                     + [p.read_text() for p in built.dir.rglob("*") if p.is_file()])
    assert any(w in seen for w in forbidden_words())
