"""The policy audit log: one entry per draft edit, publish and label move."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from toolscope.policies.models import Policy, PolicyAuditAction, PolicyAuditEntry
from toolscope.policies.services.diff import document_diff
from toolscope.policies.services.documents import policy_document_build
from toolscope.telemetry.models import Project

# The summary lists this many changes; the entry's detail holds all of them.
SUMMARY_CHANGES = 3


def audit_record(
    *,
    project: Project,
    user: AbstractBaseUser | None,
    action: PolicyAuditAction | str,
    summary: str,
    detail: dict[str, Any] | None = None,
) -> PolicyAuditEntry:
    # An anonymous user (a management command, a test) is recorded as nobody.
    user = user if user is not None and user.is_authenticated else None
    return PolicyAuditEntry.objects.create(
        project=project, user=user, action=action, summary=summary, detail=detail or {}
    )


def audit_draft_change(
    *, policy: Policy, user: AbstractBaseUser | None, before: dict[str, Any]
) -> PolicyAuditEntry | None:
    """Record what an edit changed in the draft, given the draft from before the edit: its
    document, or its snapshot (services/drafts.py), which the entry keeps so the edit can be
    undone.

    Nothing is recorded when the document did not change (a save without edits).
    """
    snapshot = before if "document" in before else None
    if snapshot is not None:
        before = snapshot["document"]
    changes = document_diff(old=before, new=policy_document_build(policy=policy))
    if not changes:
        return None
    shown = "; ".join(changes[:SUMMARY_CHANGES])
    more = len(changes) - SUMMARY_CHANGES
    summary = f"draft: {shown}" + (f"; and {more} more" if more > 0 else "")
    return audit_record(
        project=policy.project, user=user, action=PolicyAuditAction.DRAFT_CHANGED, summary=summary,
        detail={"changes": changes, **({"before": snapshot} if snapshot is not None else {})},
    )
