"""Query-parameter and POST forms of the dashboard, and the time range every page reads."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from urllib.parse import urlencode

from django import forms
from django.http import QueryDict

from dashboard.selectors.overview import slice_where
from toolscope.telemetry.models import Scope

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
PRESETS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
DEFAULT_RANGE = "7d"
# Up to this span charts show hours; beyond it, days.
HOURLY_UP_TO = timedelta(days=7)
MAX_CUSTOM_DAYS = 366
RANGE_KEYS = ("range", "start", "end")
# A value and its unit are joined by a no-break space: "7 d" must never wrap between 7 and d.
NBSP = "\N{NO-BREAK SPACE}"
BUCKET_ADJECTIVES = {"hour": "hourly", "day": "daily"}


@dataclass(frozen=True)
class TimeRange:
    """[start, end), whole UTC hours, and the previous period of the same length."""

    key: str
    start: datetime
    end: datetime

    @property
    def length(self) -> timedelta:
        return self.end - self.start

    @property
    def previous_start(self) -> datetime:
        return self.start - self.length

    @property
    def bucket(self) -> str:
        return "hour" if self.length <= HOURLY_UP_TO else "day"

    @property
    def bucket_label(self) -> str:
        """How often charts have a point: hourly, daily."""
        return BUCKET_ADJECTIVES[self.bucket]

    @property
    def params(self) -> dict[str, str]:
        if self.key != "custom":
            return {"range": self.key}
        last_day = (self.end - DAY).date()
        return {"range": "custom", "start": self.start.date().isoformat(), "end": last_day.isoformat()}

    @property
    def query(self) -> str:
        """The range as a query string (no leading ?), for links and CSV exports."""
        return urlencode(self.params)

    @property
    def label(self) -> str:
        """The first and the last day, or the first and the last minute (a preset counts its last
        hour whole: ending at 11:00, it holds 10:54's data, so it reads "to 10:59")."""
        if self.key == "custom":
            return f"{self.start:%Y-%m-%d} to {self.end - DAY:%Y-%m-%d} UTC"
        return f"{self.start:%Y-%m-%d %H:%M} to {self.end - timedelta(minutes=1):%Y-%m-%d %H:%M} UTC"

    @property
    def span_label(self) -> str:
        """The length, number and unit unbreakable: 24 h, 7 d."""
        hours = int(self.length.total_seconds() // 3600)
        return f"{hours}{NBSP}h" if hours < 48 else f"{hours // 24}{NBSP}d"

    @property
    def slug(self) -> str:
        """For file names: 2026-11-01_2026-11-08."""
        return f"{self.start:%Y-%m-%dT%H}_{self.end:%Y-%m-%dT%H}"


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


class TimeRangeForm(forms.Form):
    range = forms.ChoiceField(
        required=False,
        choices=[("24h", "Last 24 hours"), ("7d", "Last 7 days"), ("30d", "Last 30 days"), ("custom", "Custom")],
    )
    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if data.get("range") == "custom":
            start, end = data.get("start"), data.get("end")
            if start is None or end is None:
                raise forms.ValidationError("A custom range needs a start and an end date.")
            if end < start:
                raise forms.ValidationError("The end date is before the start date.")
            if (end - start).days >= MAX_CUSTOM_DAYS:
                raise forms.ValidationError(f"A custom range spans at most {MAX_CUSTOM_DAYS} days.")
        return data

    def time_range(self, *, now: datetime) -> TimeRange:
        """The chosen range; the default one when the parameters are missing or invalid.
        Presets end with the current hour, included; custom dates are whole UTC days."""
        data = self.cleaned_data if self.is_valid() else {}
        key = data.get("range") or DEFAULT_RANGE
        if key == "custom":
            return TimeRange(key, _midnight(data["start"]), _midnight(data["end"]) + DAY)
        end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + HOUR
        return TimeRange(key, end - PRESETS[key], end)


def time_range_parse(params: QueryDict, *, now: datetime) -> tuple[TimeRange, TimeRangeForm]:
    form = TimeRangeForm(params)
    time_range = form.time_range(now=now)
    if not form.is_bound or not form.is_valid():
        return time_range, form
    # Re-bound so the picker shows the range in force (the default when nothing was chosen).
    return time_range, TimeRangeForm(initial=time_range.params)


# --- tools table ---------------------------------------------------------------------------------

TOOL_SORTS = [
    ("name", "Name"), ("calls", "Calls"), ("error_rate", "Error %"), ("p50_ms", "p50"), ("p95_ms", "p95"),
    ("mean_output_tokens", "Mean output tokens"), ("catalog_schema_tokens", "Schema tokens"),
    ("duplicate_rate", "Duplicate %"), ("times_advertised", "Turns advertised"), ("times_called", "Turns calling"),
    ("schema_usd", "Schema $"), ("output_usd", "Output $"), ("last_used", "Last used"),
]
TOOL_SHOW = [
    ("", "All tools"), ("called", "Called in the range"), ("unused", "Advertised, never called"),
    ("errors", "With errors"), ("unknown", "Not in the catalog"),
]


class ToolTableForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Name contains")
    show = forms.ChoiceField(required=False, choices=TOOL_SHOW)
    sort = forms.ChoiceField(required=False, choices=TOOL_SORTS)
    dir = forms.ChoiceField(required=False, choices=[("asc", "ascending"), ("desc", "descending")])

    def options(self) -> dict[str, str]:
        data = self.cleaned_data if self.is_valid() else {}
        sort = data.get("sort") or "calls"
        default_dir = "asc" if sort == "name" else "desc"
        return {"q": (data.get("q") or "").strip(), "show": data.get("show") or "",
                "sort": sort, "dir": data.get("dir") or default_dir}


# --- overview ------------------------------------------------------------------------------------


class SliceForm(forms.Form):
    """The overview's filter: one agent, one model, or both (blank: all)."""

    agent = forms.CharField(required=False, max_length=200)
    model = forms.CharField(required=False, max_length=200)

    def where(self) -> dict[str, str]:
        """The rollups' slice columns to filter on (overview selectors' `where`)."""
        data = self.cleaned_data if self.is_valid() else {}
        return slice_where(agent=data.get("agent") or "", model=data.get("model") or "")

    def query(self) -> str:
        """The filter as a query string (no leading ?), for CSV links."""
        data = self.cleaned_data if self.is_valid() else {}
        return urlencode({field: data[field] for field in ("agent", "model") if data.get(field)})


# --- sessions list -------------------------------------------------------------------------------


SESSION_SORTS = [("time", "Newest"), ("tokens", "Most tokens"), ("cost", "Most dollars"), ("errors", "Most errors"),
                 ("turns", "Most turns")]


class SessionFilterForm(forms.Form):
    agent = forms.CharField(required=False, max_length=200)
    model = forms.CharField(required=False, max_length=200)
    errors = forms.ChoiceField(required=False, choices=[("", "Any"), ("yes", "With errors"), ("no", "Without")])
    near_window = forms.BooleanField(required=False, label="Near the window")
    gateway = forms.BooleanField(required=False, label="Through the MCP gateway")
    proxy = forms.BooleanField(required=False, label="Through toolscope-proxy")
    q = forms.CharField(required=False, max_length=200, strip=True, label="Search")
    sort = forms.ChoiceField(required=False, choices=SESSION_SORTS)
    # "<sort value>|<id>" of the last row shown: keyset pagination, no COUNT and no OFFSET.
    after = forms.CharField(required=False, max_length=80, widget=forms.HiddenInput)

    def filters(self) -> dict[str, object]:
        data = self.cleaned_data if self.is_valid() else {}
        errors = {"yes": True, "no": False}.get(data.get("errors") or "")
        sort = data.get("sort") or "time"
        return {"agent": data.get("agent") or "", "model": data.get("model") or "", "has_errors": errors,
                "near_window": bool(data.get("near_window")), "gateway": bool(data.get("gateway")),
                "proxy": bool(data.get("proxy")),
                "q": data.get("q") or "", "sort": sort,
                "after": cursor_parse(data.get("after") or "") if sort == "time" else count_cursor_parse(
                    data.get("after") or "")}


def cursor_parse(raw: str) -> tuple[datetime, int] | None:
    moment, sep, pk = raw.rpartition("|")
    if not sep:
        return None
    try:
        parsed = datetime.fromisoformat(moment)
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)), int(pk)
    except ValueError:
        return None


def count_cursor_parse(raw: str) -> tuple[int, int] | None:
    """A cursor of a list sorted by a number (tokens, dollars, errors, turns): "<value>|<id>"."""
    value, sep, pk = raw.rpartition("|")
    try:
        return (int(value), int(pk)) if sep else None
    except ValueError:
        return None


def cursor_format(value: datetime | int, pk: int) -> str:
    return f"{value.isoformat() if isinstance(value, datetime) else value}|{pk}"


# --- API keys ------------------------------------------------------------------------------------


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(max_length=100)
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices, widget=forms.CheckboxSelectMultiple, initial=[Scope.INGEST, Scope.POLICY_READ]
    )
