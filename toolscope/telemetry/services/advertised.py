"""Advertised sets: each distinct list of tools a turn advertised, stored once per project."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from toolscope_agent.engine.schemas import canonical_json, schema_hash

from toolscope.telemetry.models import AdvertisedSet, Project

Advertised = list[dict[str, str]]


def advertised_entry(tool: dict[str, Any]) -> dict[str, str]:
    """A turn's tool as its advertised set records it: the name and the definition's schema hash
    (given by a `{name, schema_hash}` reference, else computed from the full definition)."""
    if "schema_hash" in tool:
        return {"name": tool["name"], "schema_hash": tool["schema_hash"]}
    return {"name": tool["name"],
            "schema_hash": schema_hash(tool["name"], tool.get("description", ""), tool.get("input_schema", {}))}


def advertised_digest(tools: Advertised) -> str:
    return hashlib.sha256(canonical_json(tools).encode()).hexdigest()


def advertised_sets_resolve(*, project: Project, lists: Sequence[Advertised]) -> list[AdvertisedSet | None]:
    """The set row of each list (None for an empty one), creating missing ones: two queries."""
    digests = [advertised_digest(tools) if tools else None for tools in lists]
    wanted = {digest: tools for digest, tools in zip(digests, lists, strict=True) if digest}
    if not wanted:
        return [None] * len(lists)
    AdvertisedSet.objects.bulk_create(
        [AdvertisedSet(project=project, digest=d, tools=tools, tool_count=len(tools)) for d, tools in wanted.items()],
        ignore_conflicts=True,
    )
    rows = {row.digest: row for row in AdvertisedSet.objects.filter(project=project, digest__in=wanted)}
    return [rows[digest] if digest else None for digest in digests]
