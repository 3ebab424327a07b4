"""The oracle a diagnosis runs simulates the engine served: a llama-server command's drafting
policy (``--spec-draft-p-min``, ``--spec-draft-n-min``) reaches the oracle's config, read from
the command as a user types it; a vLLM launch, which has no such policy, never gets one."""

from pathlib import Path

from specdoctor.experiments.base import Context
from specdoctor.experiments.launch_settings import settings
from specdoctor.experiments.oracle_gap import oracle_config
from specdoctor.launch import parse_command

LLAMA = ("llama-server -m t.gguf -md d.gguf --spec-draft-n-max 4 --spec-draft-p-min 0.75 "
         "--spec-draft-n-min 2 --port 8081")


def _ctx(tmp_path: Path, cmd: str) -> Context:
    launch = parse_command(cmd)
    s = settings(launch)
    return Context(workdir=tmp_path, method=s.method, k=s.k, target_dir=s.target,
                   draft_dir=s.draft, prompts=("def f():",), max_tokens=16, settings=s,
                   engine=launch.engine)


def test_a_llama_server_launch_hands_its_drafting_policy_to_the_oracle(tmp_path):
    c = oracle_config(_ctx(tmp_path, LLAMA), 0.0, 1.0)
    assert (c.draft_p_min, c.draft_n_min, c.k) == (0.75, 2, 4)
    bare = oracle_config(_ctx(tmp_path, LLAMA.replace(" --spec-draft-p-min 0.75", "")
                              .replace(" --spec-draft-n-min 2", "")), 0.0, 1.0)
    assert (bare.draft_p_min, bare.draft_n_min) == (0.0, 0)


def test_a_vllm_launch_gets_no_policy(tmp_path):
    cmd = ("vllm serve t --speculative-config "
           "'{\"method\": \"draft_model\", \"model\": \"d\", \"num_speculative_tokens\": 4, "
           "\"p_min\": 0.5}'")
    c = oracle_config(_ctx(tmp_path, cmd), 0.0, 1.0)
    assert (c.draft_p_min, c.draft_n_min) == (0.0, 0)


class _Oracle:
    """The oracle's per-prompt units (drafts, accepted at each position), as prompt_units()
    returns them: the counts of the oracle with the policy at p_min 0.75 in
    benchmarks/results/llamacpp_p_min.txt (39 drafts, 57 accepted), spread over 2 prompts."""

    def prompt_units(self):
        import numpy as np

        return np.array([[20, 19, 8, 2, 0], [19, 18, 7, 3, 0]], dtype=float)


def _run_counting(drafts: int, accepted: int):
    from specdoctor.acceptance.profile import AcceptanceProfile
    from specdoctor.bench.measure import MeasureParams, Measurement, RequestRecord

    m = Measurement(url="http://x", model="m", params=MeasureParams(num_prompts=2),
                    engine="llamacpp")
    m.requests = [RequestRecord(i, "p", 48, 0.1, AcceptanceProfile(drafts=None, draft_tokens=28,
                                                                   accepted_tokens=accepted // 2))
                  for i in range(2)]
    m.total = AcceptanceProfile(drafts=drafts, draft_tokens=56, accepted_tokens=accepted, k=4)
    return m


def test_without_drafts_per_request_the_totals_are_compared_by_the_count_test():
    from specdoctor.experiments.oracle_gap import gap

    # the server's counts at p_min 0.75 (38 drafts, 55 accepted): consistent with the oracle's
    same, _ = gap(_Oracle(), _run_counting(38, 55))
    assert same.equal and same.bounded and same.low == 0.0 == same.high
    # a run that accepted a third less on the same drafts is not
    lost, _ = gap(_Oracle(), _run_counting(38, 36))
    assert lost.below and lost.low is None


def test_the_oracles_position_0_is_its_own_where_the_engine_counts_only_accepted(tmp_path):
    """llama-server counts accepted tokens, not each position, so the comparison has one
    column, accepted per draft (57/39 here); the weak-drafter rule reads the oracle's own
    position 0 (37 of 39 drafts), not that column."""
    from specdoctor.experiments.oracle_gap import OracleGreedy

    ctx = _ctx(tmp_path, LLAMA)
    ctx.oracle_greedy = _Oracle()
    ctx.measured.greedy = _run_counting(38, 55)
    OracleGreedy().run(ctx, ())
    assert ctx.oracle_pos0 is not None and abs(ctx.oracle_pos0 - 37 / 39) < 1e-9
