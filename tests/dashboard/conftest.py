"""Dashboard fixtures: a project with activity and people of every role (plus an outsider)."""

from __future__ import annotations

import pytest
from django.test import Client

from tests import factories
from tests.dashboard.builders import build_activity
from toolscope.telemetry.models import Role


@pytest.fixture
def activity(project):
    return build_activity(project)


@pytest.fixture
def editor(project):
    user = factories.make_user("editor")
    factories.make_member(project, user, Role.EDITOR)
    return user


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def viewer_client(member):
    return _client(member)


@pytest.fixture
def editor_client(editor):
    return _client(editor)


@pytest.fixture
def admin_client(owner):
    return _client(owner)


@pytest.fixture
def outsider_client(outsider):
    return _client(outsider)


@pytest.fixture
def root_client(superuser):
    return _client(superuser)
