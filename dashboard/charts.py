"""Plotly figures from selector rows. Pure: rows in, `go.Figure` out, never a query.

Templates embed `chart_json(figure)` and static/dashboard/charts.js draws it with the plotly.js
served from our own static files (never a CDN; no figure is rendered to HTML here).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from dashboard.forms import NBSP

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
COLORS = {
    "system_prompt_tokens": "#9aa5b1",
    "schema_tokens": "#e8743b",
    "message_tokens": "#4c78a8",
    "call_tokens": "#b279a2",
    "tool_output_tokens": "#54a24b",
    "unattributed_tokens": "#d3d3d3",
    "provider": "#222222",
    "calls": "#4c78a8",
    "errors": "#d64545",
    "window": "#d64545",
    "neutral": "#4c78a8",
}
# A small template of our own: plotly's default one adds ~10 KB of JSON to every figure.
TEMPLATE = go.layout.Template(layout={
    "font": {"family": FONT, "size": 12, "color": "#1f2933"},
    "paper_bgcolor": "rgba(0,0,0,0)",
    "plot_bgcolor": "rgba(0,0,0,0)",
    "margin": {"l": 56, "r": 16, "t": 72, "b": 40},
    "xaxis": {"gridcolor": "#e4e7eb", "zeroline": False, "automargin": True},
    "yaxis": {"gridcolor": "#e4e7eb", "zeroline": False, "automargin": True, "rangemode": "tozero"},
    # Title on the first line, the legend on the second, both above the plot.
    "title": {"x": 0, "xanchor": "left", "y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 10}},
    "legend": {"orientation": "h", "y": 1.01, "yanchor": "bottom", "x": 0, "xanchor": "left"},
    "hovermode": "x unified",
    "colorway": [COLORS["neutral"], COLORS["schema_tokens"], COLORS["tool_output_tokens"], COLORS["errors"]],
})
# Below this share of the window at its peak, a session's budget chart opens zoomed on its turns.
WINDOW_ZOOM_BELOW = 0.4
# Histograms: at most this many bins; a log axis once the largest value is this many times the smallest.
MAX_BINS = 40
LOG_SPREAD = 20
_ESCAPES = {ord("<"): "\\u003C", ord(">"): "\\u003E", ord("&"): "\\u0026"}


def chart_json(figure: go.Figure) -> str:
    """The figure as JSON safe inside <script type="application/json"> (as json_script escapes)."""
    return figure.to_json().translate(_ESCAPES)


def _figure(data: Sequence[Any], *, title: str = "", height: int = 320, **layout: Any) -> go.Figure:
    return go.Figure(data=list(data), layout={"template": TEMPLATE, "title": {"text": title}, "height": height,
                                              **layout})


def tokens_by_component(rows: Sequence[dict[str, Any]], *, components: Sequence[tuple[str, str]],
                        bucket: str) -> go.Figure:
    """Stacked areas of estimated input tokens by component, and the provider's count as a line."""
    x = [row["bucket"] for row in rows]
    traces: list[Any] = [
        go.Scatter(x=x, y=[row[key] for row in rows], name=label, stackgroup="budget", mode="lines",
                   line={"width": 0.5, "color": COLORS[key]}, fillcolor=COLORS[key])
        for key, label in components
    ]
    # Stacked last: where every turn has a provider count, the stack's top is the provider's line.
    traces.append(go.Scatter(
        x=x, y=[row["unattributed_tokens"] for row in rows], name="Unattributed (provider minus estimate)",
        stackgroup="budget", mode="lines", line={"width": 0.5, "color": COLORS["unattributed_tokens"]},
        fillcolor=COLORS["unattributed_tokens"]))
    traces.append(go.Scatter(x=x, y=[row["provider_input_tokens"] for row in rows], name="Input (provider)",
                             mode="lines", line={"color": COLORS["provider"], "width": 1.5, "dash": "dot"}))
    return _figure(traces, title=f"Input tokens by component, per {bucket}", yaxis={"title": "tokens"})


def tool_ranking(rows: Sequence[dict[str, Any]], *, key: str, title: str, color: str = COLORS["neutral"]) -> go.Figure:
    """Horizontal bars, largest on top."""
    ordered = list(reversed(rows))
    bar = go.Bar(x=[row[key] for row in ordered], y=[row["name"] for row in ordered], orientation="h",
                 marker={"color": color}, hovertemplate="%{y}: %{x:,}<extra></extra>")
    height = max(200, 60 + 24 * len(rows))
    return _figure([bar], title=title, height=height, hovermode="closest", showlegend=False,
                   margin={"l": 8, "r": 16, "t": 40, "b": 32})


def tool_calls(rows: Sequence[dict[str, Any]], *, bucket: str) -> go.Figure:
    """One tool's calls per bucket, errors stacked on top of the successful ones."""
    x = [row["bucket"] for row in rows]
    ok = go.Bar(x=x, y=[row["calls"] - row["errors"] for row in rows], name="ok", marker={"color": COLORS["calls"]})
    failed = go.Bar(x=x, y=[row["errors"] for row in rows], name="not ok", marker={"color": COLORS["errors"]})
    return _figure([ok, failed], title=f"Calls per {bucket}", barmode="stack", yaxis={"title": "calls"})


@dataclass(frozen=True)
class Bin:
    low: float
    high: float
    count: int


def histogram_bins(values: Sequence[float]) -> tuple[list[Bin], bool]:
    """Bins for a histogram and whether they are logarithmic.

    Durations and output sizes are skewed: most calls take milliseconds, a few take a minute, and
    equal-width bins would put nearly every call in the first one. Values spread over more than
    LOG_SPREAD times get bins of equal ratio (values at or below zero join the first); the bin
    count comes from the values (see _bin_count).
    """
    data = sorted(value for value in values if value is not None)
    if not data:
        return [], False
    positive = [value for value in data if value > 0]
    log = len(positive) > 1 and positive[-1] / positive[0] > LOG_SPREAD
    low, high = (positive[0], positive[-1]) if log else (data[0], data[-1])
    if high == low:  # one size: a bar of its own width around it, not one of width 0 that draws nothing
        pad = max(abs(low) * 0.05, 0.5)
        return [Bin(low - pad, high + pad, len(data))], False
    count = _bin_count([math.log10(max(value, low)) for value in data] if log else data)
    if log:
        ratio = (high / low) ** (1 / count)
        edges = [low * ratio**i for i in range(count)] + [high]
    else:
        edges = [low + (high - low) * i / count for i in range(count)] + [high]
    counts = [0] * count
    for value in data:
        counts[min(max(bisect.bisect_right(edges, value) - 1, 0), count - 1)] += 1
    return [Bin(edges[i], edges[i + 1], counts[i]) for i in range(count)], log


def _bin_count(scaled: Sequence[float]) -> int:
    """The Rice rule (2·n^(1/3)), or more bins when the middle half of the values is narrow
    (Freedman-Diaconis: width 2·IQR·n^(-1/3)), so a tight cluster beside a few outliers is
    still spread over several bins; at most MAX_BINS. `scaled` is sorted."""
    n = len(scaled)
    rice = math.ceil(2 * n ** (1 / 3))
    iqr = scaled[(3 * n) // 4] - scaled[n // 4]
    fd = math.ceil((scaled[-1] - scaled[0]) / (2 * iqr * n ** (-1 / 3))) if iqr > 0 else rice
    return max(1, min(MAX_BINS, max(rice, fd)))


def _amount(value: float, unit: str) -> str:
    if unit == "ms" and value >= 1000:
        return f"{value / 1000:.3g}{NBSP}s"
    return f"{value:,.3g}{NBSP}{unit}" if value < 1000 else f"{value:,.0f}{NBSP}{unit}"


def _log_ticks(low: float, high: float, unit: str) -> dict[str, Any]:
    """1-2-5 ticks between low and high, placed at their log10 and labelled in the unit."""
    ticks = [m * 10**e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
             for m in (1, 2, 5) if low <= m * 10**e <= high]
    return {"tickvals": [math.log10(t) for t in ticks], "ticktext": [_amount(t, unit) for t in ticks]}


def histogram(values: Sequence[float], *, title: str, unit: str, color: str = COLORS["neutral"]) -> go.Figure:
    """Calls per bin of `values` (see histogram_bins); a logarithmic axis when the bins are."""
    bins, log = histogram_bins(values)
    scale: Callable[[float], float] = math.log10 if log else float
    low = [scale(b.low) for b in bins]
    widths = [scale(b.high) - start for b, start in zip(bins, low, strict=True)]
    bar = go.Bar(
        x=[start + width / 2 for start, width in zip(low, widths, strict=True)], width=widths or None,
        y=[b.count for b in bins], marker={"color": color, "line": {"width": 0.5, "color": "#fff"}},
        customdata=[f"{_amount(b.low, unit)} to {_amount(b.high, unit)}" for b in bins],
        hovertemplate="%{customdata}: %{y} calls<extra></extra>",
    )
    xaxis: dict[str, Any] = {"title": f"{unit}, logarithmic" if log else unit}
    if log:
        xaxis.update(_log_ticks(bins[0].low, bins[-1].high, unit))
    return _figure([bar], title=title, height=280, hovermode="closest", bargap=0, margin={"t": 40},
                   xaxis=xaxis, yaxis={"title": "calls"}, showlegend=False)


def session_budget(turns: Sequence[dict[str, Any]], *, components: Sequence[tuple[str, str]],
                   context_window: int) -> go.Figure:
    """Per turn: the budget's components as stacked bars, the context window as a line and the
    provider's reported input as markers."""
    x = [turn["index"] for turn in turns]
    traces: list[Any] = [
        go.Bar(x=x, y=[turn[key] or 0 for turn in turns], name=label, marker={"color": COLORS[key]})
        for key, label in components
    ]
    # On the turns the provider reported: components plus this bar reach its marker exactly.
    traces.append(go.Bar(x=x, y=[turn.get("unattributed_tokens") for turn in turns],
                         name="Unattributed (provider minus estimate)",
                         marker={"color": COLORS["unattributed_tokens"]}))
    reported = [(turn["index"], turn["input_tokens"]) for turn in turns if turn["input_tokens"] is not None]
    marker = {"color": COLORS["provider"], "symbol": "diamond", "size": 8}
    traces.append(go.Scatter(x=[i for i, _ in reported], y=[v for _, v in reported], mode="markers",
                             name="Input (provider)", marker=marker))
    peak = max([turn["estimated_input_tokens"] or 0 for turn in turns] + [v for _, v in reported] + [1])
    whole = [0, max(context_window, peak) * 1.08]
    # A session far below its window would show flat bars under the line: it opens zoomed on the
    # turns, and a button shows the whole window.
    zoomed = peak < context_window * WINDOW_ZOOM_BELOW
    # The legend goes under the plot: above it, the buttons at its right end covered its last entries;
    # the top margin keeps the buttons under the title on a phone.
    figure = _figure(traces, title="Context budget per turn", barmode="stack", height=420,
                     xaxis={"title": "turn", "dtick": 1 if len(turns) <= 30 else None},
                     yaxis={"title": "tokens", "range": [0, peak * 1.15] if zoomed else whole},
                     legend={"y": -0.3, "yanchor": "top"}, margin={"t": 76, "b": 110})
    figure.add_hline(y=context_window, line={"color": COLORS["window"], "dash": "dash", "width": 1.5},
                     annotation={"text": f"context window {context_window:,}", "xanchor": "left"},
                     annotation_position="top left")
    figure.update_layout(updatemenus=[{
        "type": "buttons", "direction": "left", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom",
        "active": 1 if zoomed else 0, "showactive": True, "font": {"size": 11}, "pad": {"r": 0, "t": 0},
        "buttons": [
            {"label": "Whole window", "method": "relayout", "args": [{"yaxis.range": whole}]},
            {"label": "Fit the turns", "method": "relayout", "args": [{"yaxis.range": [0, peak * 1.15]}]},
        ],
    }])
    return figure


# The timeline's rows: the most-called tools one each, the rest together, so it stays readable
# at any number of calls (a row per call overlapped its labels from ~100 calls on).
TIMELINE_ROWS = 12
OTHER_TOOLS = "(other tools)"


def timeline_rows(calls: Sequence[dict[str, Any]], *, rows: int = TIMELINE_ROWS) -> list[str]:
    """The row of each call: its tool's name for the `rows` - 1 most-called tools (all of them
    when there are at most `rows`), OTHER_TOOLS for the rest; ties go to the tool called first."""
    counts = Counter(call["tool_name"] for call in calls)
    if len(counts) <= rows:
        return [call["tool_name"] for call in calls]
    kept = {name for name, _ in counts.most_common(rows - 1)}
    return [call["tool_name"] if call["tool_name"] in kept else OTHER_TOOLS for call in calls]


def session_timeline(calls: Sequence[dict[str, Any]]) -> go.Figure:
    """Each tool call as a bar from its start (seconds after the session started) for its duration,
    on its tool's row (timeline_rows: at most TIMELINE_ROWS, whatever the number of calls; a call's
    turn and tool are in its hover text, never a label on the plot). When any call's time is
    unknown (offset_s None: a transcript), every call is drawn by its order instead, one step
    each: no time axis is drawn that the data does not have."""
    rows = timeline_rows(calls)
    colors = [COLORS["calls"] if call["status"] == "ok" else COLORS["errors"] for call in calls]
    timed = all(call["offset_s"] is not None for call in calls)
    if timed:
        widths = [max((call["duration_ms"] or 0) / 1000, 0.05) for call in calls]
        starts = [call["offset_s"] for call in calls]
        hover = "%{customdata[0]} (%{customdata[1]})<br>start %{base:.1f} s, %{customdata[2]} ms<extra></extra>"
        title = "Tool calls over the session"
        xaxis = {"title": "seconds since the session started"}
    else:
        widths, starts = [0.9] * len(calls), list(range(len(calls)))
        hover = "%{customdata[0]} (%{customdata[1]})<br>call %{base} in order; time not recorded<extra></extra>"
        title = "Tool calls in order (the source records no times)"
        xaxis = {"title": "order of the calls", "dtick": 1 if len(calls) <= 30 else None}
    bar = go.Bar(
        x=widths, base=starts, y=rows, orientation="h", width=0.7,
        marker={"color": colors, "line": {"width": 0}},
        customdata=[[f"turn {call['turn_index']} {call['tool_name']}", call["status"], call["duration_ms"]]
                    for call in calls],
        hovertemplate=hover,
    )
    order = sorted(dict.fromkeys(rows), key=lambda row: row == OTHER_TOOLS)  # the rest last
    return _figure([bar], title=title, height=max(180, 90 + 26 * len(order)), hovermode="closest",
                   showlegend=False, margin={"t": 40}, xaxis=xaxis,
                   yaxis={"autorange": "reversed", "categoryorder": "array", "categoryarray": order,
                          "type": "category", "rangemode": "normal"})


def simulation_days(days: dict[str, dict[str, int]]) -> go.Figure:
    """Schema tokens advertised against what the simulated policy would have sent, per day."""
    x = list(days)
    advertised = go.Bar(x=x, y=[day["advertised_tokens"] for day in days.values()], name="Advertised (recorded)",
                        marker={"color": COLORS["schema_tokens"]})
    sent = go.Bar(x=x, y=[day["sent_tokens"] for day in days.values()], name="Sent under the policy",
                  marker={"color": COLORS["calls"]})
    return _figure([advertised, sent], title="Schema tokens per day", barmode="group", yaxis={"title": "tokens"})


def recommendation_curve(candidates: Sequence[dict[str, Any]], front: Sequence[str],
                         recommended: str | None) -> go.Figure:
    """Every candidate policy as a point: hard misses (x) against what the candidates are ranked
    on (y, held-out sessions): the share of dollars saved when the sessions were priced (a list
    that changes mid-session re-writes the cache), else the net tokens saved (schema tokens saved
    less the recoverable misses' round trips, as a share of the schema tokens advertised); the
    Pareto front (recommend.pareto, on that same figure) as a line, the recommended point marked."""
    dollars = bool(candidates) and all(row.get("priced_sessions") for row in candidates)
    key = "net_dollars_share" if dollars else "net_saved_share"

    def points(rows: Sequence[dict[str, Any]], **style: Any) -> go.Scatter:
        return go.Scatter(x=[row["hard_miss_rate"] * 100 for row in rows],
                          y=[row[key] * 100 for row in rows],
                          customdata=[[row["saved_share"] * 100, row["recoverable_miss_rate"] * 100,
                                       row["net_saved_share"] * 100] for row in rows],
                          text=[row["name"] for row in rows], hovertemplate="%{text}<br>%{x:.1f}% hard misses, "
                          f"%{{y:.1f}}% {'of the dollars' if dollars else 'net tokens'} saved "
                          "(%{customdata[2]:.1f}% net tokens, %{customdata[0]:.1f}% of schemas, "
                          "%{customdata[1]:.1f}% recoverable misses)<extra></extra>", **style)
    on_front = sorted((row for row in candidates if row["name"] in front), key=lambda row: row["hard_miss_rate"])
    traces = [points(candidates, mode="markers", name="Candidates", marker={"color": "#c5ccd3", "size": 7}),
              points(on_front, mode="lines+markers", name="Pareto front", marker={"color": COLORS["calls"], "size": 8})]
    best = [row for row in candidates if row["name"] == recommended]
    if best:
        traces.append(points(best, mode="markers", name="Recommended",
                             marker={"color": COLORS["schema_tokens"], "size": 14, "symbol": "star"}))
    what = "Dollars saved" if dollars else "Net tokens saved"
    return _figure(traces, title=f"{what} against hard misses (held-out sessions)",
                   xaxis={"title": "calls missed hard (%)", "rangemode": "tozero"},
                   yaxis={"title": "dollars saved under prompt caching (%)" if dollars
                          else "net tokens saved (% of schema tokens)"}, hovermode="closest")
