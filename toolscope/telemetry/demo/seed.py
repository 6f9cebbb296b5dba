"""The demo project, end to end: admin login, project, catalog, published policies and sessions."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from toolscope.policies.models import Tool
from toolscope.policies.services.search_history import search_history_refresh
from toolscope.telemetry.demo.generator import CONTEXT_WINDOW, sessions_generate
from toolscope.telemetry.demo.policy import policy_history_store
from toolscope.telemetry.demo.store import StoredCounts, catalog_store, demo_delete, sessions_store
from toolscope.telemetry.models import Membership, Project, Role, Scope, Session, ToolCall, Turn
from toolscope.telemetry.services.api_keys import CreatedKey
from toolscope.telemetry.services.projects import DEFAULT_KEY_SCOPES, project_create

DEMO_SLUG = "demo"
DEMO_NAME = "Demo coding agent"
ADMIN_USERNAME = "admin"


@dataclass(frozen=True)
class DemoSeedResult:
    created: bool  # False when the demo project existed and was left alone
    admin_password: str
    key: CreatedKey | None  # only for a newly created project: a stored key cannot be shown again
    counts: StoredCounts


def demo_anchor(now: datetime) -> datetime:
    """The instant demo sessions end before: `now` truncated to the hour, so runs within an hour agree."""
    return now.replace(minute=0, second=0, microsecond=0)


def demo_admin_reset() -> tuple[AbstractBaseUser, str]:
    """The superuser `admin` with a new random password, created if missing."""
    user_model = get_user_model()
    user = user_model.objects.filter(username=ADMIN_USERNAME).first()
    password = secrets.token_urlsafe(12)
    if user is None:
        user = user_model.objects.create_superuser(ADMIN_USERNAME, "admin@example.com", password)
        return user, password
    user.set_password(password)
    user.is_staff = user.is_superuser = user.is_active = True
    user.save(update_fields=["password", "is_staff", "is_superuser", "is_active"])
    return user, password


@transaction.atomic
def demo_seed(*, sessions: int, seed: int, anchor: datetime, reset: bool = False) -> DemoSeedResult:
    """Create the demo project, or only reset the admin login if it exists and `reset` is False."""
    admin, password = demo_admin_reset()
    existing = Project.objects.filter(slug=DEMO_SLUG).first()
    if existing is not None and not reset:
        Membership.objects.get_or_create(project=existing, user=admin, defaults={"role": Role.ADMIN})
        return DemoSeedResult(created=False, admin_password=password, key=None, counts=_counts(existing))
    if existing is not None:
        demo_delete(project=existing)
    # The printed key also reads: the README's read API and `client.sessions()` work with it at once.
    created = project_create(slug=DEMO_SLUG, name=DEMO_NAME, owner=ADMIN_USERNAME, context_window=CONTEXT_WINDOW,
                             key_scopes=(*DEFAULT_KEY_SCOPES, Scope.READ))
    tools = catalog_store(project=created.project)
    # Published before the sessions are stored: processing accounts outputs under production.
    policy_history_store(policy=created.policy, tools=tools, user=admin)
    records = sessions_generate(count=sessions, seed=seed, anchor=anchor)
    counts = sessions_store(project=created.project, records=records, tools=tools)
    # What the hourly refresh would learn, so the served policies carry search_history at once.
    search_history_refresh(project=created.project, until=anchor)
    return DemoSeedResult(created=True, admin_password=password, key=created.key, counts=counts)


def _counts(project: Project) -> StoredCounts:
    return StoredCounts(
        tools=Tool.objects.filter(project=project).count(),
        sessions=Session.objects.filter(project=project).count(),
        turns=Turn.objects.filter(project=project).count(),
        tool_calls=ToolCall.objects.filter(project=project).count(),
    )
