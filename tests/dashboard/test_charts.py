"""Chart builders: rows in, plotly figures out, safe to embed, never a query."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pytest

from dashboard import charts
from dashboard.selectors import COMPONENTS

T0 = datetime(2026, 11, 20, tzinfo=UTC)


def _series(n=3):
    return [{"bucket": T0 + timedelta(hours=h), "system_prompt_tokens": 10, "schema_tokens": 20, "message_tokens": 5,
             "call_tokens": 2, "tool_output_tokens": h, "provider_input_tokens": 40,
             "unattributed_tokens": 40 - (37 + h)} for h in range(n)]


def test_tokens_chart_stacks_the_components_and_the_unattributed_band_up_to_the_provider_line():
    figure = charts.tokens_by_component(_series(), components=COMPONENTS, bucket="hour")
    stacked = [trace for trace in figure.data if trace.stackgroup == "budget"]
    assert [trace.name for trace in stacked] == ["System prompt", "Tool schemas", "Messages", "Tool calls (arguments)",
                                                 "Tool outputs", "Unattributed (provider minus estimate)"]
    assert list(figure.data[-1].y) == [40, 40, 40]
    tops = [sum(trace.y[h] for trace in stacked) for h in range(3)]
    assert tops == [40, 40, 40]  # components plus the band make the provider's count


def test_chart_json_is_safe_inside_a_script_element():
    rows = [{"name": "</script><script>alert(1)</script>", "calls": 3}]
    text = charts.chart_json(charts.tool_ranking(rows, key="calls", title="t"))
    assert "</script>" not in text and "<" not in text
    assert json.loads(text)["data"][0]["y"] == ["</script><script>alert(1)</script>"]


def test_figures_use_our_small_template_not_plotlys_default():
    text = charts.chart_json(charts.histogram([1, 2, 3], title="t", unit="ms"))
    assert len(text) < 4000


def test_session_budget_draws_the_window_and_opens_zoomed_far_below_it():
    turns = [{"index": i, "system_prompt_tokens": 100, "schema_tokens": 100, "message_tokens": None,
              "call_tokens": 0, "tool_output_tokens": 10 * i, "estimated_input_tokens": 200 + 10 * i,
              "input_tokens": 250 if i else None} for i in range(3)]
    figure = charts.session_budget(turns, components=COMPONENTS, context_window=200_000)
    assert figure.layout.shapes[0].y0 == 200_000
    assert figure.layout.yaxis.range[1] < 1000
    markers = figure.data[-1]
    assert (list(markers.x), list(markers.y)) == ([1, 2], [250, 250])


def test_session_timeline_places_calls_by_offset_and_duration():
    calls = [{"turn_index": 0, "tool_name": "bash", "status": "ok", "duration_ms": 1500, "offset_s": 2.0},
             {"turn_index": 1, "tool_name": "grep", "status": "error", "duration_ms": None, "offset_s": 5.0}]
    bar = charts.session_timeline(calls).data[0]
    assert list(bar.base) == [2.0, 5.0]
    assert list(bar.x) == [1.5, 0.05]


def test_charts_handle_no_rows():
    for figure in (charts.tokens_by_component([], components=COMPONENTS, bucket="day"),
                   charts.tool_ranking([], key="calls", title="t"), charts.tool_calls([], bucket="hour"),
                   charts.histogram([], title="t", unit="ms"),
                   charts.session_budget([], components=COMPONENTS, context_window=1000),
                   charts.session_timeline([])):
        assert json.loads(charts.chart_json(figure))["layout"]


def _skewed():
    """250 fast calls (1 to 10 ms) and 10 slow ones (20 to 40 s), as a shell tool's durations look."""
    rng = random.Random(7)
    return [rng.uniform(1, 10) for _ in range(250)] + [rng.uniform(20_000, 40_000) for _ in range(10)]


def test_skewed_durations_are_spread_over_logarithmic_bins():
    bins, log = charts.histogram_bins(_skewed())
    assert log
    assert sum(b.count for b in bins) == 260
    # Equal-width bins would hold all 250 fast calls in the first one.
    assert max(b.count for b in bins) < 0.3 * 260
    assert all(b.high / b.low == pytest.approx(bins[0].high / bins[0].low) for b in bins)


def test_values_of_one_order_of_magnitude_get_equal_width_bins():
    bins, log = charts.histogram_bins([100 + i for i in range(200)])
    assert not log
    assert {round(b.high - b.low, 6) for b in bins} == {round(bins[0].high - bins[0].low, 6)}
    assert sum(b.count for b in bins) == 200


def test_the_bin_count_grows_with_the_data_and_stays_bounded():
    few, _ = charts.histogram_bins([1.0, 2.0, 3.0, 4.0])
    many, _ = charts.histogram_bins([float(i) for i in range(1, 5001)])
    assert len(few) < len(many) <= charts.MAX_BINS


def test_one_repeated_value_is_one_bin_and_zeros_join_the_first_log_bin():
    assert charts.histogram_bins([5, 5, 5]) == ([charts.Bin(4.5, 5.5, 3)], False)  # a width to draw
    bins, log = charts.histogram_bins([0, 0, 1, 10, 100, 1000])
    assert log and bins[0].count >= 3 and sum(b.count for b in bins) == 6


def test_the_log_histogram_labels_its_ticks_in_the_unit():
    figure = charts.histogram(_skewed(), title="Duration", unit="ms")
    assert figure.layout.xaxis.title.text == "ms, logarithmic"
    assert "10\N{NO-BREAK SPACE}ms" in figure.layout.xaxis.ticktext
    assert "20\N{NO-BREAK SPACE}s" in figure.layout.xaxis.ticktext
    assert sum(figure.data[0].y) == 260


def test_session_budget_of_a_session_near_its_window_shows_the_whole_window():
    turns = [{"index": i, "system_prompt_tokens": 3000, "schema_tokens": 9000, "message_tokens": 100,
              "call_tokens": 0, "tool_output_tokens": 40_000 * i, "estimated_input_tokens": 12_100 + 40_000 * i,
              "input_tokens": 12_500 + 40_000 * i} for i in range(5)]
    figure = charts.session_budget(turns, components=COMPONENTS, context_window=200_000)
    assert figure.layout.yaxis.range[1] >= 200_000
    assert figure.layout.shapes[0].y0 == 200_000


def _candidate(name, hard, net_tokens, dollars, priced=3):
    return {"name": name, "hard_miss_rate": hard, "net_saved_share": net_tokens, "net_dollars_share": dollars,
            "saved_share": net_tokens, "recoverable_miss_rate": 0.0, "priced_sessions": priced}


def test_the_recommendation_curve_plots_what_the_front_is_ranked_on():
    """Priced sessions rank candidates by dollars (recommend.pareto): plotting net tokens drew a
    front with a point another front point beat on both axes (the screenshots found it)."""
    rows = [_candidate("deferred top 8", 0.073, 0.237, 0.106), _candidate("deferred top 16", 0.026, 0.294, 0.096),
            _candidate("search top 32", 0.013, 0.085, 0.001)]
    front = ["search top 32", "deferred top 16", "deferred top 8"]  # ascending dollars with misses
    figure = charts.recommendation_curve(rows, front, "deferred top 16")
    line = next(trace for trace in figure.data if trace.name == "Pareto front")
    assert list(line.y) == sorted(line.y)  # more misses buy more savings along the front
    assert figure.layout.yaxis.title.text.startswith("dollars saved")
    unpriced = charts.recommendation_curve([{**row, "priced_sessions": 0} for row in rows], front, None)
    assert unpriced.layout.yaxis.title.text.startswith("net tokens saved")
    assert [round(y, 1) for y in unpriced.data[0].y] == [23.7, 29.4, 8.5]
