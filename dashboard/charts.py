"""Plotly figures from selector rows. Pure: rows in, `go.Figure` out, never a query.

Templates embed `chart_json(figure)` and static/dashboard/charts.js draws it with the plotly.js
served from our own static files (never a CDN; no figure is rendered to HTML here).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
COLORS = {
    "system_prompt_tokens": "#9aa5b1",
    "schema_tokens": "#e8743b",
    "message_tokens": "#4c78a8",
    "tool_output_tokens": "#54a24b",
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


def histogram(values: Sequence[float], *, title: str, x_title: str, color: str = COLORS["neutral"]) -> go.Figure:
    trace = go.Histogram(x=list(values), nbinsx=40, marker={"color": color}, hovertemplate="%{x}: %{y}<extra></extra>")
    return _figure([trace], title=title, height=280, hovermode="closest", bargap=0.05, margin={"t": 40},
                   xaxis={"title": x_title}, yaxis={"title": "calls"})


def session_budget(turns: Sequence[dict[str, Any]], *, components: Sequence[tuple[str, str]],
                   context_window: int) -> go.Figure:
    """Per turn: the budget's components as stacked bars, the context window as a line and the
    provider's reported input as markers."""
    x = [turn["index"] for turn in turns]
    traces: list[Any] = [
        go.Bar(x=x, y=[turn[key] or 0 for turn in turns], name=label, marker={"color": COLORS[key]})
        for key, label in components
    ]
    reported = [(turn["index"], turn["input_tokens"]) for turn in turns if turn["input_tokens"] is not None]
    marker = {"color": COLORS["provider"], "symbol": "diamond", "size": 8}
    traces.append(go.Scatter(x=[i for i, _ in reported], y=[v for _, v in reported], mode="markers",
                             name="Input (provider)", marker=marker))
    peak = max([turn["estimated_input_tokens"] or 0 for turn in turns] + [v for _, v in reported] + [1])
    whole = [0, max(context_window, peak) * 1.08]
    # A session far below its window would show flat bars under the line: it opens zoomed on the
    # turns, and a button shows the whole window.
    zoomed = peak < context_window * WINDOW_ZOOM_BELOW
    figure = _figure(traces, title="Context budget per turn", barmode="stack", height=380,
                     xaxis={"title": "turn", "dtick": 1 if len(turns) <= 30 else None},
                     yaxis={"title": "tokens", "range": [0, peak * 1.15] if zoomed else whole})
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


def session_timeline(calls: Sequence[dict[str, Any]]) -> go.Figure:
    """Each tool call as a bar from its start (seconds after the session started) for its duration."""
    labels = [f"#{call['turn_index']} {call['tool_name']}" for call in calls]
    colors = [COLORS["calls"] if call["status"] == "ok" else COLORS["errors"] for call in calls]
    durations = [max((call["duration_ms"] or 0) / 1000, 0.05) for call in calls]
    bar = go.Bar(
        x=durations, base=[call["offset_s"] for call in calls], y=list(range(len(calls))), orientation="h",
        marker={"color": colors}, customdata=[[label, call["status"], call["duration_ms"]] for label, call in
                                              zip(labels, calls, strict=True)],
        hovertemplate="%{customdata[0]} (%{customdata[1]})<br>start %{base:.1f} s, %{customdata[2]} ms<extra></extra>",
    )
    height = max(220, 60 + 16 * len(calls))
    return _figure([bar], title="Tool calls over the session", height=min(height, 900), hovermode="closest",
                   showlegend=False, margin={"t": 40},
                   xaxis={"title": "seconds since the session started"},
                   yaxis={"autorange": "reversed", "tickvals": list(range(len(calls))), "ticktext": labels,
                          "rangemode": "normal"})
