"""What the dashboard's selectors share: the budget components, time buckets, the user's projects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F, Sum
from django.db.models.functions import TruncDay

from toolscope.telemetry.models import Project

# Turn budget components, in stacking order: (ProjectHourly / Turn field, label).
# What each holds: README, "How the numbers are made".
COMPONENTS = (
    ("system_prompt_tokens", "System prompt"),
    ("schema_tokens", "Tool schemas"),
    ("message_tokens", "Messages"),
    ("call_tokens", "Tool calls (arguments)"),
    ("tool_output_tokens", "Tool outputs"),
)
# The provider's count minus the estimate, over the turns the provider reported: what no
# component explains (negative where the estimate is larger). Components plus it make the bill.
UNATTRIBUTED = ("unattributed_tokens", "Unattributed")
STEP = {"hour": timedelta(hours=1), "day": timedelta(days=1)}


def projects_for_user(*, user: AbstractBaseUser) -> list[Project]:
    """The projects the user may open: all for a superuser, else those they are a member of."""
    queryset = Project.objects.order_by("name", "slug")
    if not getattr(user, "is_superuser", False):
        queryset = queryset.filter(memberships__user=user)
    return list(queryset)


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def buckets(start: datetime, end: datetime, bucket: str) -> list[datetime]:
    moment = start.astimezone(UTC)
    if bucket == "day":
        moment = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    out = []
    while moment < end:
        out.append(moment)
        moment += STEP[bucket]
    return out


def bucket_sums(queryset: Any, *, bucket: str, names: tuple[str, ...]) -> list[dict[str, Any]]:
    """Sums of `names` per hour or UTC day of the rollup rows in `queryset`: one query."""
    expression = F("hour") if bucket == "hour" else TruncDay("hour", tzinfo=UTC)
    # Aliased: an annotation may not reuse a field's name.
    rows = (queryset.annotate(bucket=expression).values("bucket").order_by("bucket")
            .annotate(**{f"sum_{name}": Sum(name) for name in names}))
    return [{"bucket": row["bucket"], **{name: row[f"sum_{name}"] for name in names}} for row in rows]


def zero_filled(rows: list[dict[str, Any]], *, start: datetime, end: datetime, bucket: str,
                names: tuple[str, ...]) -> list[dict[str, Any]]:
    by_bucket = {row["bucket"]: row for row in rows}
    return [by_bucket.get(moment) or {"bucket": moment, **dict.fromkeys(names, 0)}
            for moment in buckets(start, end, bucket)]
