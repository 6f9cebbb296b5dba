"""Projects: created together with everything a new project needs to receive telemetry."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction

from toolscope.policies.models import Policy, SelectionMode
from toolscope.telemetry.error_patterns import validate_error_patterns
from toolscope.telemetry.models import Encoding, Membership, Project, Role, Scope
from toolscope.telemetry.services.api_keys import CreatedKey, api_key_create

DEFAULT_KEY_SCOPES = (Scope.INGEST, Scope.POLICY_READ)
MIN_CONTEXT_WINDOW = 1024


@dataclass(frozen=True)
class CreatedProject:
    project: Project
    policy: Policy
    owner: AbstractBaseUser
    # Set only when the owner account was created here; shown once, never stored in clear.
    owner_password: str | None
    key: CreatedKey


def _validate(*, slug: str, owner: str, encoding: str, context_window: int) -> None:
    try:
        validate_slug(slug)
    except ValidationError as exc:
        raise ValidationError({"slug": f"{slug!r} is not a slug: use letters, digits, - and _."}) from exc
    if len(slug) > Project._meta.get_field("slug").max_length:
        raise ValidationError({"slug": "A slug has at most 64 characters."})
    if not owner:
        raise ValidationError({"owner": "An owner username is required."})
    try:
        get_user_model()._meta.get_field("username").run_validators(owner)
    except ValidationError as exc:
        raise ValidationError({"owner": f"{owner!r} is not a valid username: {' '.join(exc.messages)}"}) from exc
    if encoding not in Encoding.values:
        raise ValidationError({"encoding": f"Choose an encoding from {', '.join(Encoding.values)}."})
    if context_window < MIN_CONTEXT_WINDOW:
        raise ValidationError({"context_window": f"A context window has at least {MIN_CONTEXT_WINDOW} tokens."})


def _owner_get_or_create(*, username: str, email: str) -> tuple[AbstractBaseUser, str | None]:
    user_model = get_user_model()
    user = user_model.objects.filter(username=username).first()
    if user is not None:
        return user, None
    password = secrets.token_urlsafe(16)
    return user_model.objects.create_user(username=username, email=email, password=password), password


def _project_insert(*, slug: str, name: str, encoding: str, context_window: int) -> Project:
    taken = ValidationError({"slug": f"A project with slug {slug!r} already exists."})
    if Project.objects.filter(slug=slug).exists():
        raise taken
    try:
        # A savepoint, so that losing a race on the unique slug leaves the outer transaction usable.
        with transaction.atomic():
            return Project.objects.create(
                slug=slug, name=name or slug, encoding=encoding, context_window=context_window
            )
    except IntegrityError as exc:
        raise taken from exc


@transaction.atomic
def project_create(
    *,
    slug: str,
    name: str,
    owner: str,
    encoding: str = Encoding.O200K_BASE,
    context_window: int = 200_000,
    owner_email: str = "",
    key_scopes: tuple[str, ...] = DEFAULT_KEY_SCOPES,
) -> CreatedProject:
    """A project with its draft policy, its owner (created if missing) as admin, and one API key
    (what an agent needs by default: ingest and fetch the policy; the demo's also reads).

    `owner` is a username. Raises ValidationError for a bad or taken slug, an unknown encoding, a
    too small context window or a bad username; nothing is created then.
    """
    _validate(slug=slug, owner=owner, encoding=encoding, context_window=context_window)
    project = _project_insert(slug=slug, name=name, encoding=encoding, context_window=context_window)
    user, password = _owner_get_or_create(username=owner, email=owner_email)
    Membership.objects.create(project=project, user=user, role=Role.ADMIN)
    policy = Policy.objects.create(project=project, mode=SelectionMode.ALL, updated_by=user)
    key = api_key_create(project=project, name="default key", scopes=list(key_scopes), created_by=user)
    return CreatedProject(project=project, policy=policy, owner=user, owner_password=password, key=key)


def project_error_patterns_update(
    *, project: Project, patterns: list[dict[str, str]], user: AbstractBaseUser | None
) -> bool:
    """Replace the project's tool error patterns (docs/events.md, "Tool errors"); ValidationError
    names the first bad one. Recorded in the policy audit log; False when nothing changed. Calls
    stored before keep the classification they got."""
    from toolscope.policies.models import PolicyAuditAction
    from toolscope.policies.services.audit import audit_record

    validate_error_patterns(patterns)
    if patterns == project.tool_error_patterns:
        return False
    before = [p["name"] for p in project.tool_error_patterns]
    project.tool_error_patterns = patterns
    project.save(update_fields=["tool_error_patterns"])
    audit_record(
        project=project, user=user, action=PolicyAuditAction.DRAFT_CHANGED,
        summary=f"tool error patterns: {', '.join(p['name'] for p in patterns) or 'none'}",
        detail={"error_patterns": {"before": before, "after": patterns}},
    )
    return True
