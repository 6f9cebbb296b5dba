"""The API keys page."""

from __future__ import annotations

from toolscope.telemetry.models import ApiKey


def api_key_list(*, project_id: int) -> list[ApiKey]:
    """The project's keys, newest first, with who created them: one query. Never the hash."""
    return list(
        ApiKey.objects.filter(project_id=project_id).select_related("created_by")
        .defer("secret_hash").order_by("-created_at", "-id")
    )


def api_key_get(*, project_id: int, key_id: int) -> ApiKey | None:
    """The project's key `key_id`; None for another project's key."""
    return ApiKey.objects.filter(project_id=project_id, pk=key_id).first()
