"""Publishing a draft into an immutable version, and pointing labels at versions.

Every write here runs with the project's row locked (SELECT ... FOR NO KEY UPDATE), which
serialises publishes and label moves of one project: two publishes can never read the same last
number, including the very first one, when there is no version row yet to lock. NO KEY UPDATE
rather than UPDATE so ingest, which inserts rows referencing the project (FOR KEY SHARE), is not
blocked meanwhile.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from toolscope.policies.models import Policy, PolicyAuditAction, PolicyLabel, PolicyVersion
from toolscope.policies.selectors import policy_version_previous
from toolscope.policies.services.audit import audit_record
from toolscope.policies.services.diff import document_diff, policy_version_diff
from toolscope.policies.services.documents import PRODUCTION_LABEL, document_content, policy_document_build
from toolscope.policies.services.serving import LABEL_PATTERN, policy_served_invalidate
from toolscope.policies.services.validation import PolicyProblem, policy_validate
from toolscope.telemetry.models import Project

User = AbstractBaseUser | None


class PolicyInvalid(ValidationError):
    """The draft cannot be published; `problems` lists every reason, each naming its field."""

    def __init__(self, problems: list[PolicyProblem]) -> None:
        self.problems = problems
        by_field: dict[str, list[str]] = {}
        for problem in problems:
            by_field.setdefault(problem.field, []).append(problem.message)
        super().__init__(by_field)


def policy_publish(
    *, policy: Policy, user: User, comment: str = "", label: str = PRODUCTION_LABEL
) -> PolicyVersion:
    """Validate the draft, freeze it as the project's next version and point `label` at it."""
    _label_name_check(label)
    with transaction.atomic():
        project = _project_lock(policy.project_id)
        if problems := policy_validate(policy=policy):
            raise PolicyInvalid(problems)
        version = _version_create(project=project, policy=policy, user=user, comment=comment, label=label)
        summary = f"published v{version.number} to {label}" + (f": {comment}" if comment else "")
        previous = policy_version_previous(version=version)
        audit_record(project=project, user=user, action=PolicyAuditAction.PUBLISHED, summary=summary, detail={
            "version": version.number, "label": label, "etag": version.etag, "comment": comment,
            "changes": policy_version_diff(old=previous, new=version),
        })
        _label_point(project=project, name=label, version=version, user=user)
    return version


def version_repeated(*, project_id: int, document: dict[str, Any], current: PolicyVersion | None) -> int | None:
    """The number of a version whose content `document` (the draft's) repeats: the label's
    `current`, else the newest; publishing it would only add a copy (point the label at that
    version instead). One query, for the newest."""
    newest = PolicyVersion.objects.filter(project_id=project_id).order_by("-number").first()
    return next((version.number for version in (current, newest)
                 if version is not None and document_content(version.document) == document), None)


def label_move(*, project: Project, name: str, version: PolicyVersion, user: User) -> PolicyLabel:
    """Point label `name` at `version` (creating the label); a move to an older version is a rollback."""
    _label_name_check(name)
    if version.project_id != project.pk:
        raise ValidationError({"version": "The version belongs to another project."})
    with transaction.atomic():
        _project_lock(project.pk)
        label, _previous = _label_point(project=project, name=name, version=version, user=user)
    return label


def label_delete(*, label: PolicyLabel, user: User) -> None:
    """Agents asking for a deleted label get a 404 from their next fetch on."""
    with transaction.atomic():
        _project_lock(label.project_id)
        audit_record(
            project=label.project, user=user, action=PolicyAuditAction.LABEL_MOVED,
            summary=f"deleted label {label.name} (was v{label.version.number})",
            detail={"label": label.name, "from": label.version.number, "to": None},
        )
        label.delete()
        policy_served_invalidate(project_id=label.project_id)


def policy_etag(*, number: int, document: dict[str, Any]) -> str:
    """A strong ETag: the version number and a hash of the canonical JSON (sorted keys, compact).

    The label and the ETag itself are left out of the hash: a version keeps its ETag under every
    label it is served by.
    """
    content = {key: value for key, value in document.items() if key not in ("etag", "label")}
    digest = hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return f'"v{number}-{digest[:16]}"'


def _project_lock(project_id: int) -> Project:
    return Project.objects.select_for_update(no_key=True).get(pk=project_id)


def _label_name_check(name: str) -> None:
    if not LABEL_PATTERN.fullmatch(name):
        raise ValidationError({"label": "A label is 1 to 64 letters, digits, '-' or '_'."})


def _version_create(
    *, project: Project, policy: Policy, user: User, comment: str, label: str
) -> PolicyVersion:
    last = PolicyVersion.objects.filter(project=project).aggregate(last=Max("number"))["last"] or 0
    number, published_at = last + 1, timezone.now()
    built = policy_document_build(policy=policy)
    document = {
        "schema_version": built.pop("schema_version"), "project": built.pop("project"), "label": label,
        "version": number, "etag": "", "published_at": published_at.isoformat(), **built,
    }
    document["etag"] = policy_etag(number=number, document=document)
    return PolicyVersion.objects.create(
        project=project, number=number, document=document, etag=document["etag"], comment=comment,
        published_by=_user_or_none(user), published_at=published_at,
    )


def _label_point(
    *, project: Project, name: str, version: PolicyVersion, user: User
) -> tuple[PolicyLabel, PolicyVersion | None]:
    """Move (or create) the label; audit the move and invalidate served copies. Caller holds the lock."""
    label = PolicyLabel.objects.filter(project=project, name=name).select_related("version").first()
    previous = label.version if label is not None else None
    if previous is not None and previous.pk == version.pk:
        return label, previous
    if label is None:
        label = PolicyLabel(project=project, name=name)
    label.version, label.updated_by = version, _user_or_none(user)
    label.save()
    _label_move_record(project=project, name=name, previous=previous, version=version, user=user)
    policy_served_invalidate(project_id=project.pk)
    return label, previous


def _label_move_record(
    *, project: Project, name: str, previous: PolicyVersion | None, version: PolicyVersion, user: User
) -> None:
    rollback = previous is not None and version.number < previous.number
    was = f"v{previous.number}" if previous is not None else "nothing"
    audit_record(
        project=project, user=user,
        action=PolicyAuditAction.ROLLBACK if rollback else PolicyAuditAction.LABEL_MOVED,
        summary=f"{'rolled back' if rollback else 'moved'} {name}: {was} → v{version.number}",
        detail={
            "label": name, "from": previous.number if previous else None, "to": version.number,
            "changes": document_diff(old=previous.document, new=version.document) if previous else [],
        },
    )


def _user_or_none(user: User) -> AbstractBaseUser | None:
    return user if user is not None and user.is_authenticated else None
