"""Shared fixtures. Tenancy tests use three named people: owner, member and outsider."""

from __future__ import annotations

import pytest

# Pure tests (SDK, engine, transcripts) run without Django (-p no:django), so nothing here
# imports models at module level.
ADMIN, VIEWER = "admin", "viewer"


def _factories():
    from tests import factories

    return factories


@pytest.fixture
def project(db):
    return _factories().make_project("acme")


@pytest.fixture
def other_project(db):
    return _factories().make_project("globex")


@pytest.fixture
def owner(project):
    user = _factories().make_user("owner")
    _factories().make_member(project, user, ADMIN)
    return user


@pytest.fixture
def member(project):
    user = _factories().make_user("member")
    _factories().make_member(project, user, VIEWER)
    return user


@pytest.fixture
def outsider(other_project):
    user = _factories().make_user("outsider")
    _factories().make_member(other_project, user, ADMIN)
    return user


@pytest.fixture
def superuser(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("root", "root@example.com", "root-password")
