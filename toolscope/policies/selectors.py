"""Read queries over the catalog and policies."""

from __future__ import annotations

from typing import Any

from toolscope.policies.models import PolicyLabel, PolicyVersion, Tool
from toolscope.telemetry.models import Project

SETTINGS_FIELDS = ("scope", "requires_approval", "redact", "max_result_tokens", "on_schema_error", "retry_policy")


def tool_list(*, project: Project) -> list[dict[str, Any]]:
    """The catalog as the API shows it, one query."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.input_schema,
            "source": tool.source,
            "schema_hash": tool.schema_hash,
            "schema_tokens": tool.schema_tokens,
            "first_seen_at": tool.first_seen_at,
            "last_seen_at": tool.last_seen_at,
            "settings": {field: getattr(tool, field) for field in SETTINGS_FIELDS},
        }
        for tool in Tool.objects.filter(project=project).order_by("name")
    ]


def tool_catalog(*, project: Project) -> list[dict[str, Any]]:
    """The catalog in the engine's shape, in name order (one query)."""
    return [
        {"name": name, "description": description, "input_schema": schema, "source": source}
        for name, description, schema, source in Tool.objects.filter(project=project)
        .order_by("name").values_list("name", "description", "input_schema", "source")
    ]


def policy_version_previous(*, version: PolicyVersion) -> PolicyVersion | None:
    """The version published just before `version` in its project, one query."""
    return (
        PolicyVersion.objects.filter(project_id=version.project_id, number__lt=version.number)
        .order_by("-number")
        .first()
    )


def policy_label_version(*, project_id: int, name: str) -> PolicyVersion | None:
    """The version label `name` points at, one query."""
    label = PolicyLabel.objects.filter(project_id=project_id, name=name).select_related("version").first()
    return label.version if label is not None else None


def policy_label_names(*, project_id: int) -> list[str]:
    return list(PolicyLabel.objects.filter(project_id=project_id).values_list("name", flat=True))
