"""Read queries over the catalog and policies."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Max

from toolscope.policies.models import PolicyLabel, PolicyVersion, SearchHistory, Tool, ToolVersion
from toolscope.telemetry.models import Project

SETTINGS_FIELDS = ("scope", "requires_approval", "redact", "max_result_tokens", "on_schema_error", "retry_policy")


def tool_list(*, project: Project) -> list[dict[str, Any]]:
    """The catalog as the API shows it, every source's definition of a name, one query."""
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
        for tool in Tool.objects.filter(project=project).order_by("name", "source")
    ]


Definition = dict[str, Any]


def tool_catalog(
    *, project: Project, advertised: list[Definition] | None = None, source: str | None = None
) -> list[Definition]:
    """The catalog in the engine's shape, one definition per name, in name order (one query).

    The engine renders tools by name, so of a name several sources define, the one chosen is
    (docs/policy.md, "Catalog identity"): the definition the agent advertised (`advertised`: full
    definitions as sent, or {"name", "schema_hash"?, "source"?} references to catalog tools),
    else that of the advertised entry's source or of `source`, else the most recently seen. With
    `advertised`, the catalog is the advertised names only: the agent can send nothing else.
    """
    rows = Tool.objects.filter(project=project).order_by("name", "-last_seen_at", "-pk")
    wanted = {entry["name"]: entry for entry in advertised} if advertised is not None else None
    if wanted is not None:
        rows = rows.filter(name__in=wanted)
    by_name: dict[str, list[Definition]] = {}
    for name, description, schema, tool_source, digest in rows.values_list(
        "name", "description", "input_schema", "source", "schema_hash"
    ):
        by_name.setdefault(name, []).append({"name": name, "description": description, "input_schema": schema,
                                             "source": tool_source, "schema_hash": digest})
    if wanted is not None:
        _versions_add(project, wanted, by_name)
    names = sorted(by_name if wanted is None else wanted)
    chosen = (_definition_chosen(by_name.get(name, []), (wanted or {}).get(name), source) for name in names)
    return [definition for definition in chosen if definition is not None]


def _versions_add(project: Project, wanted: dict[str, Definition], by_name: dict[str, list[Definition]]) -> None:
    """An advertised reference to a definition the catalog has since replaced (another agent
    advertised the name with another schema) is that earlier definition, from ToolVersion: one
    query, only when some reference is not a current definition."""
    current = {row["schema_hash"] for rows in by_name.values() for row in rows}
    missing = {entry["schema_hash"] for entry in wanted.values()
               if entry.get("schema_hash") and entry.get("input_schema") is None} - current
    if not missing:
        return
    versions = ToolVersion.objects.filter(tool__project=project, tool__name__in=wanted, schema_hash__in=missing)
    for name, description, schema, tool_source, digest in versions.order_by("-first_seen_at").values_list(
            "tool__name", "description", "input_schema", "tool__source", "schema_hash"):
        by_name.setdefault(name, []).append({"name": name, "description": description, "input_schema": schema,
                                             "source": tool_source, "schema_hash": digest})


def tool_catalog_revision(*, project: Project) -> tuple[int, int, Any]:
    """What changes whenever `tool_catalog(project=...)` may answer differently: the number of
    the project's tools, the newest one, and the latest time one was seen (an upsert of a new or
    changed definition, or one advertised again, sets it). One aggregate query."""
    found = Tool.objects.filter(project=project).aggregate(count=Count("pk"), newest=Max("pk"),
                                                             seen=Max("last_seen_at"))
    return found["count"], found["newest"] or 0, found["seen"]


def _definition_chosen(rows: list[Definition], entry: Definition | None, source: str | None) -> Definition | None:
    """`rows` are one name's definitions, most recently seen first."""
    entry = entry or {}
    if entry.get("input_schema") is not None:
        return {"name": entry["name"], "description": entry.get("description") or "",
                "input_schema": entry["input_schema"], "source": entry.get("source") or ""}
    wanted_source = entry.get("source", source)
    for key, value in (("schema_hash", entry.get("schema_hash")), ("source", wanted_source)):
        match = next((row for row in rows if value is not None and row[key] == value), None)
        if match is not None:
            return _engine_shape(match)
    return _engine_shape(rows[0]) if rows else None


def _engine_shape(row: Definition) -> Definition:
    return {key: row[key] for key in ("name", "description", "input_schema", "source")}


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


def policy_label_served(*, project_id: int, name: str) -> tuple[PolicyVersion, SearchHistory | None] | None:
    """The version label `name` points at and the project's learned search history, one query."""
    label = (PolicyLabel.objects.filter(project_id=project_id, name=name)
             .select_related("version", "project__search_history").first())
    if label is None:
        return None
    return label.version, getattr(label.project, "search_history", None)


def policy_label_names(*, project_id: int) -> list[str]:
    return list(PolicyLabel.objects.filter(project_id=project_id).values_list("name", flat=True))
