"""benchmarks/serving.py's bookkeeping: the Poisson workload, static
batching's schedule, the latency summary and the greedy-token comparison,
checked against values worked out by hand (no model is run)."""

import os
import sys

import numpy as np
import pytest

BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, os.path.abspath(BENCHMARKS))

pytest.importorskip("torch")  # generation.py, imported by serving.py, builds transformers models
import serving  # noqa: E402


def test_workload_is_seeded_poisson_with_lengths_in_range():
    first = serving.workload(200, 4.0, (8, 64), (8, 32), 32000, seed=3)
    again = serving.workload(200, 4.0, (8, 64), (8, 32), 32000, seed=3)
    assert first == again
    arrivals = np.array([arrival for arrival, _, _ in first])
    assert arrivals[0] == 0.0 and np.all(np.diff(arrivals) >= 0)
    # Exponential gaps of mean 1 / rate: 199 gaps of mean 0.25 s.
    assert 0.18 < np.diff(arrivals).mean() < 0.32
    assert all(8 <= len(prompt) <= 64 and 8 <= length <= 32 for _, prompt, length in first)
    assert all(1000 <= token < 32000 for _, prompt, _ in first for token in prompt)


def test_static_batches_follow_arrival_order():
    requests = [(float(i), [1], 2) for i in range(5)]
    assert serving.static_batches(requests, 2) == [[0, 1], [2, 3], [4]]


def test_summary_measures_from_each_arrival():
    requests = [(0.0, [1], 3), (1.0, [1], 2)]
    stamps = [[10.5, 10.7, 11.0], [12.0, 12.5]]  # start at 10
    row = serving.summarize("x", requests, 10.0, [[1, 2, 3], [4, 5]], stamps, load={})
    assert row["generated_tokens"] == 5
    assert row["seconds"] == pytest.approx(2.5)  # first arrival (10) to last token (12.5)
    assert row["tokens_per_second"] == pytest.approx(2.0)
    # TTFT 0.5 and 1.0; gaps 0.2, 0.3, 0.5; latencies 1.0 and 1.5.
    assert row["time_to_first_token"]["p50"] == pytest.approx(0.75)
    assert row["time_between_tokens"]["p50"] == pytest.approx(0.3)
    assert row["end_to_end_latency"]["p99"] == pytest.approx(1.0 + 0.99 * 0.5)
    with pytest.raises(RuntimeError, match="request 1 got 1 tokens, not 2"):
        serving.summarize("x", requests, 10.0, [[1, 2, 3], [4]], [[1, 2, 3], [4]], load={})


def test_mismatches_count_requests_and_tokens():
    counted = serving.mismatches([[1, 2, 3], [4, 5]], [[1, 2, 9], [4, 5]])
    assert counted == {"requests_differing": 1, "tokens_equal_fraction": 0.8}


def test_a_sweep_serves_the_same_requests_at_scaled_arrival_times():
    slow = serving.workload(20, 2.0, (8, 64), (8, 32), 32000, seed=5)
    fast = serving.workload(20, 8.0, (8, 64), (8, 32), 32000, seed=5)
    assert [r[1:] for r in slow] == [r[1:] for r in fast]
    np.testing.assert_allclose([r[0] for r in slow], [4 * r[0] for r in fast])


def sweep_run(rate, engine, static):
    """One rate's result as `serve` writes it: (tokens/s, p99 latency) each."""
    return {"workload": {"rate_per_second": rate}, "rows": [
        {"contender": name, "tokens_per_second": throughput,
         "end_to_end_latency": {"p50": None, "p99": latency}}
        for name, (throughput, latency) in ((serving.ENGINE, engine), (serving.STATIC, static))
    ] + [{"contender": "transformers continuous batching", "tokens_per_second": 99.0,
          "end_to_end_latency": {"p50": None, "p99": 0.1}}]}


def test_throughput_at_equal_latency_takes_the_best_rate_within_each_bound():
    runs = [sweep_run(1, (10.0, 1.0), (9.0, 6.0)), sweep_run(2, (20.0, 1.5), (15.0, 8.0)),
            sweep_run(4, (38.0, 4.0), (16.0, 20.0)), sweep_run(8, (45.0, 9.0), (16.5, 30.0))]
    rows = serving.at_equal_latency(runs)
    # Static batching's latencies, in order, are the bounds.
    assert [row["end_to_end_latency_p99_at_most"] for row in rows] == [6.0, 8.0, 20.0, 30.0]
    # Within 6 s the engine ran at 4 per second (4.0 s), static batching only at 1.
    assert rows[0]["engine"] == {"rate_per_second": 4, "tokens_per_second": 38.0}
    assert rows[0]["static"] == {"rate_per_second": 1, "tokens_per_second": 9.0}
    assert rows[0]["engine_over_static"] == pytest.approx(38.0 / 9.0)
    assert rows[1]["engine_over_static"] == pytest.approx(38.0 / 15.0)
    assert rows[2]["engine"]["rate_per_second"] == 8 and rows[3]["static"]["rate_per_second"] == 8
    # A bound tighter than every engine rate: no engine throughput to compare.
    tight = serving.at_equal_latency([sweep_run(1, (10.0, 2.0), (9.0, 1.5))])
    assert tight[0]["engine"] is None and tight[0]["engine_over_static"] is None
