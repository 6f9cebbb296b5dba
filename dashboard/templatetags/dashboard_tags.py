"""Number formatting and small helpers for the dashboard's templates."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django import template

from dashboard.forms import NBSP

register = template.Library()
DASH = "\N{EN DASH}"


@register.filter
def num(value: Any) -> str:
    """12,345; floats rounded; nothing as a dash."""
    if value is None or value == "":
        return DASH
    return f"{round(value):,}"


@register.filter
def compact(value: Any) -> str:
    """1.2k, 3.45M: for KPI tiles where width is short."""
    if value is None:
        return DASH
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{round(value):,}"


@register.filter
def pct(value: Any, digits: int = 1) -> str:
    """A share as a percentage: 0.123 -> 12.3%."""
    if value is None:
        return DASH
    return f"{value * 100:.{digits}f}%"


@register.filter
def usd(value: Any) -> str:
    """Dollars: $1,234.56 from a dollar on, else to a hundredth of a cent ($0.0105); unpriced
    (None) as a dash, never $0."""
    if value is None:
        return DASH
    amount = Decimal(value)
    return f"${amount:,.2f}" if abs(amount) >= 1 else f"${amount:.4f}"


@register.filter
def absolute(value: Any) -> Any:
    """|value|; nothing stays nothing."""
    return None if value is None else abs(value)


@register.filter
def ms(value: Any) -> str:
    if value is None:
        return DASH
    return f"{value / 1000:.2f}{NBSP}s" if value >= 1000 else f"{value:.1f}{NBSP}ms"


@register.filter
def seconds(value: Any) -> str:
    if value is None:
        return DASH
    return f"+{value:.1f}{NBSP}s" if value < 600 else f"+{value / 60:.1f}{NBSP}min"


@register.filter
def elapsed(value: Any) -> str:
    """A timedelta as 850 ms, 33 s or 2.5 min; nothing as a dash."""
    if value is None:
        return DASH
    total = value.total_seconds()
    if total < 1:
        return f"{total * 1000:.0f}{NBSP}ms"
    return f"{total:.0f}{NBSP}s" if total < 120 else f"{total / 60:.1f}{NBSP}min"


@register.filter
def kpi_value(kpi: Any) -> str:
    if kpi.kind == "usd":
        return usd(kpi.current)
    return pct(kpi.current) if kpi.kind == "share" else compact(kpi.current)


@register.filter
def kpi_change(kpi: Any) -> str:
    """+12% for counts, +1.5 pp for shares, a dash without a previous value."""
    change = kpi.change_shown
    if change is None:
        return DASH
    if kpi.kind == "share":
        return f"{change:+.1f}{NBSP}pp" if change else f"0.0{NBSP}pp"
    return f"{change * 100:+.0f}%" if change else "0%"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    try:
        return mapping[key]
    except (KeyError, IndexError, TypeError):
        return None


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def diff_class(line: str) -> str:
    """CSS class of a unified-diff line."""
    if line.startswith(("+++", "---")):
        return "diff-file"
    if line.startswith("@@"):
        return "diff-hunk"
    return {"+": "diff-add", "-": "diff-del"}.get(line[:1], "")


@register.filter
def sort_dir_for(column: str, options: dict[str, str]) -> str:
    """The direction a click on `column`'s header sorts by: flips the current one, else a default."""
    if options["sort"] == column:
        return "asc" if options["dir"] == "desc" else "desc"
    return "asc" if column == "name" else "desc"
