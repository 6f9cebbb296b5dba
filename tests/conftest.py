"""Shared fixtures. Tenancy tests use three named people: owner, member and outsider."""

from __future__ import annotations

import pytest

from tests import factories
from toolscope.telemetry.models import Role


@pytest.fixture
def project(db):
    return factories.make_project("acme")


@pytest.fixture
def other_project(db):
    return factories.make_project("globex")


@pytest.fixture
def owner(project):
    user = factories.make_user("owner")
    factories.make_member(project, user, Role.ADMIN)
    return user


@pytest.fixture
def member(project):
    user = factories.make_user("member")
    factories.make_member(project, user, Role.VIEWER)
    return user


@pytest.fixture
def outsider(other_project):
    user = factories.make_user("outsider")
    factories.make_member(other_project, user, Role.ADMIN)
    return user


@pytest.fixture
def superuser(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("root", "root@example.com", "root-password")
