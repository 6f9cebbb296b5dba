"""Small builders for test data. Each returns saved rows with sensible defaults."""

from __future__ import annotations

import itertools

from django.contrib.auth import get_user_model
from django.utils import timezone

from toolscope.telemetry.models import Membership, Project, Role, Session, ToolCall, Turn
from toolscope.telemetry.services.advertised import advertised_sets_resolve
from toolscope.telemetry.services.api_keys import CreatedKey, api_key_create

_seq = itertools.count(1)


def next_number() -> int:
    return next(_seq)


def make_user(username: str | None = None, **extra):
    username = username or f"user{next(_seq)}"
    return get_user_model().objects.create_user(username=username, password="pw-" + username, **extra)


def make_project(slug: str | None = None, **extra) -> Project:
    slug = slug or f"project-{next(_seq)}"
    return Project.objects.create(slug=slug, name=extra.pop("name", slug.title()), **extra)


def make_member(project: Project, user=None, role: str = Role.VIEWER) -> Membership:
    return Membership.objects.create(project=project, user=user or make_user(), role=role)


def make_key(project: Project, scopes=("ingest", "policy:read"), name: str = "test key") -> CreatedKey:
    return api_key_create(project=project, name=name, scopes=scopes)


def make_session(project: Project, client_id: str | None = None, **extra) -> Session:
    return Session.objects.create(
        project=project,
        client_id=client_id or f"sess-{next(_seq)}",
        started_at=extra.pop("started_at", timezone.now()),
        **extra,
    )


def make_turn(session: Session, index: int = 0, advertised=("read_file", "bash"), **extra) -> Turn:
    tools = [{"name": name, "schema_hash": f"hash-of-{name}"} for name in advertised]
    (advertised_set,) = advertised_sets_resolve(project=session.project, lists=[tools])
    return Turn.objects.create(
        advertised_set=advertised_set,
        project=session.project,
        session=session,
        client_id=extra.pop("client_id", f"turn-{next(_seq)}"),
        index=index,
        started_at=extra.pop("started_at", timezone.now()),
        **extra,
    )


def make_tool_call(turn: Turn, tool_name: str = "read_file", **extra) -> ToolCall:
    return ToolCall.objects.create(
        project=turn.project,
        session=turn.session,
        turn=turn,
        turn_index=turn.index,
        client_id=extra.pop("client_id", f"call-{next(_seq)}"),
        tool_name=tool_name,
        started_at=extra.pop("started_at", timezone.now()),
        **extra,
    )
