"""The lab's runtime patches: their pure parts, and the blind build the fault clinic serves.

The patches run inside vLLM (the clinic's measurements show what they do to acceptance:
benchmarks/results/clinic_measured.md); here, without a server, the row and block selections
they make, and that ``build_blind`` keeps the code while dropping every name.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from specdoctor.lab import patches


def _load(name: str):
    path = patches.DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_patch_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_patch_spec_parses_and_ships_its_file():
    from specdoctor.packs import spec as specmod

    for name in patches.available():
        spec = specmod.load(patches.DIR / f"{name}.toml")
        assert spec.files and all(f.is_file() for f in spec.files), name
        # a patch replaces at least one function; a probe that does not replace only learns
        # what the replacement needs (attn-shard learns the draft's layers from the proposer)
        assert any(p.replace for p in spec.probes), name
        assert all(p.replace or p.handler for p in spec.probes), name


def test_kept_kv_rows_are_the_drafted_accepted_positions_of_decode_requests():
    pytest.importorskip("torch")
    keep_mask = _load("draft_kv_keep").keep_mask
    # request 0: a prefill of 6 rows (starts at position 0); request 1: a decode step of k+1=4
    # rows whose sampled row is offset 3 (all accepted): offsets 0..k-2 = 0, 1 kept, 2 written;
    # request 2: decode, sampled at offset 1: offset 0 kept.
    mask = keep_mask([0, 6, 10, 14], [5, 9, 11], [0, 40, 17], k=3)
    assert mask == [False] * 6 + [True, True, False, False] + [True, False, False, False]
    # a chunk longer than k+1 starting past 0 (chunked prefill) is written as usual
    assert not any(keep_mask([0, 9], [8], [32], k=3))


def test_hit_blocks_are_the_full_blocks_found_cached():
    pytest.importorskip("torch")
    hit_blocks = _load("prefix_draft_kv").hit_blocks
    assert hit_blocks(32, [7, 3, 9, 4], 16) == [7, 3]
    assert hit_blocks(31, [7, 3, 9], 16) == [7]
    assert hit_blocks(0, [7, 3], 16) == []


def test_lookup_without_its_maximum_proposes_after_the_first_min_gram():
    """vLLM's own n-gram proposer, run with and without the ngram-max-ignored wrapper."""
    np = pytest.importorskip("numpy")
    ngram = pytest.importorskip("vllm.v1.spec_decode.ngram_proposer")
    wrapper = _load("ngram_max_ignored").batch_propose
    p = object.__new__(ngram.NgramProposer)
    p.min_n, p.max_n, p.k, p.max_model_len = 2, 4, 3, 64
    p.num_tokens_threshold, p.num_numba_thread_available = 8192, 1
    p.valid_ngram_draft = np.zeros((1, 3), dtype=np.int32)
    p.valid_ngram_num_drafts = np.zeros(1, dtype=np.int32)
    # the suffix 5 1 2 recurs at offset 3 (followed by 3 4 7); its last two tokens 1 2 first
    # occur at offset 0 (followed by 9 5 1)
    ctx = [1, 2, 9, 5, 1, 2, 3, 4, 7, 5, 1, 2]
    tokens = np.zeros((1, 64), dtype=np.int32)
    tokens[0, :len(ctx)] = ctx
    lengths = np.array([len(ctx)], dtype=np.int32)
    original = ngram.NgramProposer.batch_propose
    assert original(p, 1, [0], lengths, tokens, 3) == [[3, 4, 7]]
    assert wrapper(original, p, 1, [0], lengths, tokens, 3) == [[9, 5, 1]]
    assert p.max_n == 4  # the configured maximum is back after the call
    # the other direction: only a suffix of the maximum length counts; 9 5 1 2 does not recur
    # (5 1 2 does, three tokens), so no proposal where the configured lookup makes one
    other = _load("ngram_max_ignored").batch_propose_min
    assert other(original, p, 1, [0], lengths, tokens, 3) == [[]]
    assert p.min_n == 2


def _lookup_context(name: str, context: list[int], sampled: list[int],
                    entry: str = "propose") -> list[int]:
    """The context an n-gram patch hands vLLM's proposer for one request (its token row up to
    the length it passes), the engine's own buffers unchanged."""
    np = pytest.importorskip("numpy")
    tokens = np.zeros((1, 16), dtype=np.int32)
    tokens[0, :len(context)] = context
    lengths = np.array([len(context)], dtype=np.int32)
    seen = getattr(_load(name), entry)(
        lambda self, k, s, n, t, *a: t[0, :n[0]].tolist(), object(), 3, [sampled], lengths,
        tokens)
    assert lengths.tolist() == [len(context)] and tokens[0, :len(context)].tolist() == context
    return seen


def test_the_ngram_context_siblings_end_their_lookup_where_they_say():
    # the runner has written the sampled token 9 already: the context ends in it once
    context = [4, 5, 6, 9]
    assert _lookup_context("ngram_twice", context, [9]) == [4, 5, 6, 9, 9]
    assert _lookup_context("ngram_twice", context, [9], "propose_thrice") == [4, 5, 6, 9, 9, 9]
    assert _lookup_context("ngram_context_short", context, [9]) == [4, 5, 6]
    # a request that sampled nothing this step is looked up as it is
    assert _lookup_context("ngram_context_short", context, []) == context


def test_dflash_block_behind_lowers_only_the_query_positions_by_one():
    torch = pytest.importorskip("torch")
    wrapper = _load("dflash_block_behind").first_pass
    ids, pos = torch.tensor([7, 2, 2, 2]), torch.tensor([0, 1, 40, 41])

    def original(self, n, m, mm):
        return {"input_ids": ids, "positions": pos, "inputs_embeds": None}, m

    inputs, n = wrapper(original, object(), 4, 4, None)
    assert inputs["positions"].tolist() == [0, 0, 39, 40] and n == 4
    assert inputs["input_ids"] is ids and pos.tolist() == [0, 1, 40, 41]  # the buffer untouched


@pytest.mark.parametrize("name, by", [("first_pass_two", -2), ("first_pass_ahead", 1)])
def test_the_dflash_block_siblings_move_the_query_positions_their_way(name, by):
    torch = pytest.importorskip("torch")
    wrapper = getattr(_load("dflash_block_behind"), name)
    pos = torch.tensor([0, 1, 40, 41])

    def original(self, n, m, mm):
        return {"positions": pos}, m

    inputs, _ = wrapper(original, object(), 4, 4, None)
    assert inputs["positions"].tolist() == [max(p + by, 0) for p in (0, 1, 40, 41)]
    assert pos.tolist() == [0, 1, 40, 41]


@pytest.mark.parametrize("name, by", [("update", 1), ("behind", -1), ("ahead_two", 2)])
def test_draft_decode_positions_move_by_a_fixed_offset_that_never_grows(name, by):
    """vLLM's proposer writes each step's positions into its buffer and hands the next step
    that buffer: the wrapper moves what it returns by ``by`` and starts the next step from the
    true positions, so every step is ``by`` off its own and no more."""
    torch = pytest.importorskip("torch")
    wrapper = getattr(_load("draft_pos_ahead"), name)

    class Proposer:
        positions = torch.zeros(8, dtype=torch.long)

    p = Proposer()

    def original(self, positions):          # the next step's true positions, in the buffer
        self.positions[:len(positions)] = positions + 1
        return self.positions[:len(positions)]

    out = wrapper(original, p, torch.tensor([5, 7]))
    assert out.tolist() == [6 + by, 8 + by]
    for step in (2, 3, 4):
        out = wrapper(original, p, out)
        assert out.tolist() == [5 + step + by, 7 + step + by]


def test_stripped_source_keeps_the_code_and_drops_docstrings_and_comments():
    src = '"""Module doc naming vLLM PR #14464."""\n\n# a comment\ndef f(x):\n    """doc"""\n    return x + 1  # add\n'
    out = patches.stripped_source(src)
    assert "14464" not in out and "comment" not in out and "doc" not in out
    ns: dict = {}
    exec(out, ns)  # noqa: S102 - our own test source
    assert ns["f"](1) == 2


def test_a_blind_build_names_nothing_and_still_replaces(tmp_path: Path):
    out = patches.build_blind(patches.DIR / "mtp-hidden.toml", tmp_path / "site0", "G", "S")
    names = sorted(p.name for p in out.iterdir())
    assert not [n for n in names if "mtp" in n or "hidden" in n], names
    config = json.loads((out / "pack.json").read_text())
    assert config["gate"] == "G" and config["sink_env"] == "S" and "mtp" not in config["name"]
    files = {p["replace"].split(":")[0] for p in config["probes"]}
    assert files <= set(names)  # the renamed file is the one the pack loads
    assert [p["target"] for p in config["probes"]] == [
        "vllm.v1.spec_decode.llm_base_proposer.SpecDecodeBaseProposer.model_returns_tuple",
        "vllm.model_executor.models.mimo_mtp.MiMoMTP.forward"]
    assert not list(tmp_path.glob(".*"))  # no staging folder left behind


def test_the_clinic_bite_test_is_paired_over_prompts():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "clinic"))
    from measure import paired_difference

    twin = [{"drafts": 10, "accepted_tokens": 30}] * 8
    same = paired_difference(twin, twin)
    assert same["difference"] == 0 and not same["bites"]
    lower = [{"drafts": 10, "accepted_tokens": a} for a in (20, 22, 19, 21, 20, 23, 18, 20)]
    d = paired_difference(lower, twin)
    assert d["bites"] and d["ci95"][1] < 0 and abs(d["difference"] + 0.9625) < 1e-9


def test_only_the_batch_last_request_keeps_its_sampled_token():
    stale_slots = _load("last_token_batch").stale_slots
    # three requests whose sample slots are 2, 5 and 8 in a 10-token flattened batch (the last
    # request had a draft rejected): the first two keep what the shift left there, the last
    # gets its sampled token
    assert stale_slots([2, 5, 8], 10) == [2, 5]
    # one request (concurrency 1): nothing changes, as in SGLang before the fix
    assert stale_slots([7], 8) == []
    assert stale_slots([], 0) == []


def test_only_discarded_rows_with_a_sampled_token_take_the_prediction():
    predicted_tails = _load("chunk_tail_token").predicted_tails
    # a prefill chunk that is not the prompt's last (discarded, sampled 14), a decode request
    # (kept, sampled 7), a discarded row with no token (-1) and one outside the vocabulary
    assert predicted_tails([True, False, True, True], [14, 7, -1, 600], 512) == [
        True, False, False, False]
    assert predicted_tails([], [], 512) == []


@pytest.mark.parametrize("fn,every", [("propose_alternate", 2), ("propose_third", 3),
                                      ("propose_quarter", 4)])
def test_the_ngram_skip_siblings_draft_on_one_step_in_every(fn, every):
    m = _load("ngram_skip")
    m._calls[0] = 0
    found = [[5, 6], [7]]   # what the lookup proposes at every step, for two requests
    got = [getattr(m, fn)(lambda self: found, None) for _ in range(3 * every)]
    drafted = [i for i, g in enumerate(got) if g == found]
    assert drafted == list(range(every - 1, 3 * every, every))
    assert all(g == [[], []] for i, g in enumerate(got) if i not in drafted)


def test_the_ngram_length_check_sibling_stops_drafting_at_48_tokens_of_context():
    m = _load("ngram_stop_long")
    found = [[5, 6], [7], [8]]
    got = m.propose(lambda self, k, sampled, lengths, *a: found, None, 3, [[1], [2], [3]],
                    [47, 48, 100], None)
    assert got == [[5, 6], [], []]
