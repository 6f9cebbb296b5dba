"""Read queries over telemetry that the API serves."""

from __future__ import annotations

from uuid import UUID

from toolscope.telemetry.models import Artifact, Project


def artifact_get(*, project: Project, artifact_id: UUID) -> Artifact | None:
    """The artifact if it belongs to `project`; another project's id is simply not found."""
    return Artifact.objects.select_related("tool_call").filter(project=project, pk=artifact_id).first()
