"""A project's tool catalog: identifying a tool's schema however a client serialised it."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from toolscope_agent.engine.schemas import normalize_tool, schema_hash

from toolscope.policies.models import Tool, ToolVersion
from toolscope.telemetry.models import Project
from toolscope.telemetry.services.redact import hash_key, tool_definition_redact
from toolscope.tokenizer import schema_tokens


def tool_schema_hash(*, name: str, description: str, input_schema: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of {name, description, input_schema}.

    Delegates to the agent engine so the server and every agent hash a definition byte for byte
    alike (sorted keys, no whitespace, UTF-8); a hash computed twice differently would make every
    turn look like a schema change.
    """
    return schema_hash(name, description, input_schema)


def _normalized(definitions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Definitions by name, in toolscope's shape with their hash; the last one of a name wins.
    Secret literals are cut out first (PUT /tools stores definitions as sent), so the hash is the
    stored definition's."""
    by_name: dict[str, dict[str, Any]] = {}
    key = hash_key()
    for definition in definitions:
        tool = tool_definition_redact(normalize_tool(definition), key=key)
        tool["schema_hash"] = schema_hash(tool["name"], tool["description"], tool["input_schema"])
        by_name[tool["name"]] = tool
    return by_name


def _priced(by_name: dict[str, dict[str, Any]], encoding: str) -> dict[str, dict[str, Any]]:
    """Each definition with the tokens it costs in a request's tools array (cached by hash)."""
    for d in by_name.values():
        d["schema_tokens"] = schema_tokens(
            name=d["name"], description=d["description"], input_schema=d["input_schema"],
            schema_hash=d["schema_hash"], encoding=encoding,
        )
    return by_name


@transaction.atomic
def catalog_upsert(*, project: Project, definitions: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Insert new tools, update changed definitions, keep every schema in ToolVersion.

    Per-tool settings (scope, approval, redaction, ...) belong to operators and are never touched.
    Returns {"name", "schema_hash", "status": created|updated|unchanged} per tool.
    """
    by_name = _priced(_normalized(definitions), project.encoding)
    existing = {tool.name: tool for tool in Tool.objects.filter(project=project, name__in=by_name)}
    now = timezone.now()
    created, updated, results = [], [], []
    for name, d in by_name.items():
        tool = existing.get(name)
        if tool is None:
            created.append(Tool(project=project, name=name, description=d["description"],
                                input_schema=d["input_schema"], source=d["source"],
                                schema_hash=d["schema_hash"], schema_tokens=d["schema_tokens"],
                                last_seen_at=now))
            status = "created"
        elif tool.schema_hash != d["schema_hash"] or (d["source"] and tool.source != d["source"]):
            tool.description, tool.input_schema = d["description"], d["input_schema"]
            tool.schema_hash, tool.schema_tokens = d["schema_hash"], d["schema_tokens"]
            tool.source = d["source"] or tool.source
            updated.append(tool)
            status = "updated"
        else:
            status = "unchanged"
        results.append({"name": name, "schema_hash": d["schema_hash"], "status": status})
    Tool.objects.bulk_create(created, ignore_conflicts=True)
    Tool.objects.bulk_update(updated, ["description", "input_schema", "schema_hash", "schema_tokens", "source"])
    Tool.objects.filter(project=project, name__in=by_name).update(last_seen_at=now)
    _versions_record(project, by_name)
    return results


def _versions_record(project: Project, by_name: dict[str, dict[str, Any]]) -> None:
    tool_ids = dict(Tool.objects.filter(project=project, name__in=by_name).values_list("name", "pk"))
    ToolVersion.objects.bulk_create(
        [
            ToolVersion(tool_id=tool_ids[name], schema_hash=d["schema_hash"], description=d["description"],
                        input_schema=d["input_schema"], schema_tokens=d["schema_tokens"])
            for name, d in by_name.items()
        ],
        ignore_conflicts=True,
    )
