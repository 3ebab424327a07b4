"""Pure figures: spreads, significance, verdicts said plainly ("k=5 ≈ k=7"), speedups, and the
requests a cell sends (sampling, seeds, streaming usage, multi-turn history)."""

from specdoctor.bench import matrix, stats, summary
from specdoctor.bench.client import Outcome
from specdoctor.store.bench import CellRow


def _cell(config: str, tok_s: float, rep: int = 0, cell: str = "code/greedy/c1",
          stream: list[float] | None = None) -> CellRow:
    return CellRow(f"{config}|{cell}|r{rep}", config, "code", "greedy", 1, rep, "ok", None,
                   {"cell": cell, "status": "ok", "tok_s": tok_s, "requests_ok": 3,
                    "stream_tok_s_values": stream or [], "command": f"run {config}"})


CONFIGS = [{"label": "spec-off", "role": "baseline"}, {"label": "ngram:k=5"},
           {"label": "ngram:k=7"}, {"label": "ngram:k=1"}]


def test_overlapping_repeats_are_said_to_be_equal_and_the_winner_is_named():
    cells = [_cell("spec-off", v, r) for r, v in enumerate((100, 104, 98))]
    cells += [_cell("ngram:k=5", v, r) for r, v in enumerate((150, 160, 155))]
    cells += [_cell("ngram:k=7", v, r) for r, v in enumerate((152, 149, 158))]
    cells += [_cell("ngram:k=1", v, r) for r, v in enumerate((120, 118, 121))]
    rows = summary.rows(cells, CONFIGS)
    assert [r.config for r in rows] == ["spec-off", "ngram:k=5", "ngram:k=7", "ngram:k=1"]
    k5 = rows[1]
    assert (k5.tok_s.value, k5.tok_s.low, k5.tok_s.high) == (155, 150, 160)
    assert abs(k5.speedup - 155 / 100) < 1e-9 and k5.speedup_significant
    (v,) = summary.verdicts(rows)
    assert v.winner == "ngram:k=5" and v.ties == ["ngram:k=7"] and v.command == "run ngram:k=5"
    assert v.sentences[0].startswith("ngram:k=5 ≈ ngram:k=7")
    assert "not significant" in v.sentences[0]
    assert v.sentences[1].startswith("ngram:k=5 beats ngram:k=1")
    assert v.sentences[2].startswith("ngram:k=5 beats spec-off")


def test_a_speedup_inside_the_spread_is_not_significant():
    cells = [_cell("spec-off", v, r) for r, v in enumerate((100, 130))]
    cells += [_cell("ngram:k=5", v, r) for r, v in enumerate((120, 125))]
    rows = summary.rows(cells, CONFIGS)
    assert rows[1].speedup > 1 and rows[1].speedup_significant is False


def test_one_run_uses_the_request_interval_and_no_spread_is_never_a_win():
    one = stats.spread([50.0], [10.0, 11.0, 9.0, 10.5])
    assert one.basis == "requests" and one.low < 50 < one.high
    none = stats.spread([50.0])
    assert none.basis == "none" and not stats.significant(none, stats.spread([10.0]))
    assert "no spread measured" in stats.compare_text("a", none, "b", stats.spread([10.0]))


def test_a_configuration_significantly_slower_than_spec_off_is_significant_either_way():
    off, slow = stats.Spread(100, 95, 105, "repeats"), stats.Spread(60, 55, 65, "repeats")
    assert stats.significant(slow, off) and stats.significant(off, slow)
    assert stats.compare_text("ngram:k=5", slow, "spec-off", off).startswith(
        "spec-off beats ngram:k=5")
    cells = [_cell("spec-off", v, r) for r, v in enumerate((100, 104, 98))]
    cells += [_cell("ngram:k=5", v, r) for r, v in enumerate((60, 62, 58))]
    rows = summary.rows(cells, CONFIGS)
    assert rows[1].speedup < 1 and rows[1].speedup_significant


def test_percentiles_tpot_and_histogram():
    p = stats.percentiles([1.0, 2.0, 3.0, 4.0])
    assert p["p50"] == 2.5 and p["mean"] == 2.5
    assert stats.tpot(1.0, 0.2, 5) == 0.2 and stats.tpot(1.0, 0.2, 1) is None
    assert stats.accepted_histogram([{"acceptance_histogram": [1, 2]},
                                     {"acceptance_histogram": [0, 1, 4]}, {}]) == [1, 3, 4]


def test_requests_of_a_cell():
    p = matrix.MatrixParams(num_prompts=3, max_tokens=7, seed=10, official_temperature=0.7,
                            official_top_p=0.9)
    items = matrix.requests(p, matrix.Cell("code", "official", 2), "m")
    bodies = [i[0].body for i in items]
    assert [b["seed"] for b in bodies] == [10, 11, 12]
    assert all(b["temperature"] == 0.7 and b["top_p"] == 0.9 and b["stream"] for b in bodies)
    assert all(b["stream_options"] == {"include_usage": True} for b in bodies)
    greedy = matrix.requests(p, matrix.Cell("code", "greedy", 1), "m")[0][0].body
    assert (greedy["temperature"], greedy["top_p"]) == (0.0, 1.0)


def test_second_turn_carries_the_first_answer(tmp_path):
    ds = tmp_path / "q.jsonl"
    ds.write_text('{"category": "w", "turns": ["Q1", "Q2"]}\n')
    for endpoint in ("chat", "completions"):
        p = matrix.MatrixParams(num_prompts=1, dataset=str(ds), suites=("w",), endpoint=endpoint)
        (turns,) = matrix.requests(p, matrix.Cell("w", "greedy", 1), "m")
        assert turns[0].collect_text and not turns[1].collect_text
        answer = Outcome(0, 0.0, text="A1")
        second = matrix.next_turn(turns[1], turns[0], answer)
        if endpoint == "chat":
            assert second.body["messages"] == [{"role": "user", "content": "Q1"},
                                               {"role": "assistant", "content": "A1"},
                                               {"role": "user", "content": "Q2"}]
        else:
            assert second.body["prompt"] == "User: Q1\nAssistant: A1\nUser: Q2\nAssistant:"
