"""Read queries over telemetry that the API serves."""

from __future__ import annotations

import re
from uuid import UUID

from toolscope_agent.engine.compaction import ARTIFACT_ID_LENGTH

from toolscope.telemetry.models import Artifact, Project

CONTENT_ID = re.compile(f"[0-9a-f]{{{ARTIFACT_ID_LENGTH}}}")


def artifact_get(*, project: Project, artifact_id: str) -> Artifact | None:
    """The artifact of `project` with this content id (what compacted texts name; among
    identical originals, the earliest stored) or, for artifacts linked before content ids, this
    uuid. Another project's id is simply not found."""
    artifacts = Artifact.objects.select_related("tool_call").filter(project=project)
    if CONTENT_ID.fullmatch(artifact_id):
        return artifacts.filter(content_id=artifact_id).order_by("created_at", "pk").first()
    try:
        pk = UUID(artifact_id)
    except ValueError:
        return None
    return artifacts.filter(pk=pk).first()
