"""benchmarks.alternation: the rounds' order and what each round keeps (behaviour, never timings)."""

from __future__ import annotations

from benchmarks.alternation import timed_rounds, total_seconds


def test_every_other_round_runs_the_ways_in_reverse_and_keeps_each_result_with_its_seconds() -> None:
    calls: list[str] = []

    def way(name: str):
        return lambda: calls.append(name) or f"{name}{len(calls)}"

    timed = timed_rounds({"a": way("a"), "b": way("b"), "c": way("c")}, rounds=3)
    assert calls == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert [list(r) for r in timed] == [["a", "b", "c"]] * 3  # each round in the ways' order
    assert [r["a"][0] for r in timed] == ["a1", "a6", "a7"] and timed[1]["c"][0] == "c4"
    seconds = total_seconds(timed)
    assert seconds == {n: sum(r[n][1] for r in timed) for n in "abc"} and min(seconds.values()) >= 0


def test_both_timing_benchmarks_refuse_zero_rounds_as_a_usage_error(capsys) -> None:
    import pytest

    from benchmarks import seeds_in_one_process, vmas_throughput

    for bench in (vmas_throughput, seeds_in_one_process):
        with pytest.raises(SystemExit) as exit_:
            bench.main(["--rounds", "0"])
        assert exit_.value.code == 2 and "expected a whole number of rounds >= 1, got '0'" in capsys.readouterr().err
