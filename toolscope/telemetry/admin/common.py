"""Pieces every admin module uses: read-only rows, JSON and text display, links between lists."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.admin.views.main import ChangeList
from django.db.models import Model, QuerySet
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

# Raw batches and tool outputs can run to megabytes; a change page shows the start and says so.
DISPLAY_LIMIT_CHARS = 200_000
_PRE_STYLE = "white-space: pre-wrap; word-break: break-word; max-height: 40em; overflow: auto;"


def preformatted(text: str, limit: int = DISPLAY_LIMIT_CHARS) -> SafeString:
    """Text in an escaped <pre>, cut at `limit` characters with a note saying how much was cut."""
    if len(text) <= limit:
        return format_html('<pre style="{}">{}</pre>', _PRE_STYLE, text)
    return format_html(
        '<pre style="{}">{}</pre><p class="help">Showing the first {} of {} characters.</p>',
        _PRE_STYLE,
        text[:limit],
        limit,
        len(text),
    )


def pretty_json(value: Any) -> SafeString:
    return preformatted(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


def change_url(obj: Model) -> str:
    opts = obj._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])


def change_link(obj: Model | None, text: str | None = None) -> str:
    if obj is None:
        return "-"
    return format_html('<a href="{}">{}</a>', change_url(obj), text or str(obj))


def changelist_link(model: type[Model], text: str, **filters: Any) -> SafeString:
    """A link to `model`'s changelist narrowed by `filters` (lookups such as session__id__exact)."""
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    if filters:
        url = f"{url}?{urlencode(filters)}"
    return format_html('<a href="{}">{}</a>', url, text)


class ReadOnlyAdminMixin:
    """Rows that ingest, processing or publishing write: operators look at them, never edit them.

    Deleting is refused too: retention drops whole time partitions (services/retention.py), and
    the admin's cascade confirmation page would try to list every turn and tool call of a session.
    """

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class _DeferringChangeList(ChangeList):
    def get_queryset(self, request, exclude_parameters=None) -> QuerySet:
        queryset = super().get_queryset(request, exclude_parameters)
        return queryset.defer(*self.model_admin.list_defer)


class ListDeferMixin:
    """Leaves large columns (payloads, outputs) out of changelist queries; change pages load them."""

    list_defer: tuple[str, ...] = ()

    def get_changelist(self, request, **kwargs) -> type[ChangeList]:
        return _DeferringChangeList
