"""A project with a small catalog and a draft policy, its agents' key, and a clean shared cache."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from tests.admin.builders import make_policy
from tests.api.conftest import KeyClient
from tests.factories import make_key
from tests.policies.builders import make_catalog
from toolscope.policies.models import Policy, Tool
from toolscope.policies.services.publish import label_move, policy_publish


@pytest.fixture(autouse=True)
def _clean_cache():
    # The cache outlives a test's database transaction; a stale entry would leak between tests.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def tools(project) -> dict[str, Tool]:
    return make_catalog(project)


@pytest.fixture
def policy(project, tools) -> Policy:
    return make_policy(project, always_on=[tools["read_file"], tools["bash"]])


@pytest.fixture
def agent_key(project):
    return make_key(project, scopes=["policy:read"], name="agent")


@pytest.fixture
def agent(agent_key) -> KeyClient:
    return KeyClient(agent_key.secret)


@pytest.fixture
def publish(owner, django_capture_on_commit_callbacks):
    """Publishes as the owner and runs what waits for the commit (the served cache's invalidation)."""

    def _publish(policy: Policy, label: str = "production", comment: str = ""):
        with django_capture_on_commit_callbacks(execute=True):
            return policy_publish(policy=policy, user=owner, comment=comment, label=label)

    return _publish


@pytest.fixture
def move(owner, django_capture_on_commit_callbacks):
    def _move(version, name: str = "production"):
        with django_capture_on_commit_callbacks(execute=True):
            return label_move(project=version.project, name=name, version=version, user=owner)

    return _move


@pytest.fixture
def root_client(client, superuser):
    client.force_login(superuser)
    return client
