"""Who polls each label (policies/services/polls.py, issue 28 item 2): a key's fetch of a label is
recorded with the ETag it holds, whether Django answers it or the warm-poll layer in front of
Django does (api/fastpath.py), at most once per RECORD_SECONDS per process, and read back per
label, newest first, with the version the ETag names."""

from __future__ import annotations

import time

import pytest
from django.core.cache import caches

from tests.factories import make_key
from tests.policies.wsgi_client import redis_cache, serve  # noqa: F401 - redis_cache is a fixture
from toolscope.policies.services.polls import RECORD_SECONDS, policy_pollers, polls

pytestmark = pytest.mark.usefixtures("redis_cache")


@pytest.fixture(autouse=True)
def _fresh_throttle():
    polls.forget()
    yield
    polls.forget()


def test_a_poll_answered_by_django_and_one_answered_in_front_of_it_are_both_recorded(agent_key, policy, publish):
    version = publish(policy)
    served = serve()
    first = served.get(agent_key.secret, etag=version.etag)
    assert first.by_django
    [poller] = policy_pollers(project_id=version.project_id, labels=["production"])["production"]
    assert (poller.key_name, poller.etag, poller.version) == (agent_key.api_key.name, version.etag, 1)
    # The warm layer records too: with the entry gone and the throttle reset, a 304 it answers
    # alone writes it again.
    caches["default"].clear()
    polls.forget()
    served = serve()
    served.get(agent_key.secret, etag=version.etag)  # warms the new process (Django)
    caches["default"].delete_many([f"policy:poll:{version.project_id}:production:{agent_key.api_key.pk}"])
    polls.forget()
    fast = served.get(agent_key.secret, etag=version.etag)
    assert (fast.status, fast.by_django) == (304, False)
    pollers = policy_pollers(project_id=version.project_id, labels=["production"])["production"]
    assert [p.etag for p in pollers] == [version.etag]


def test_a_key_is_written_at_most_once_per_interval_and_labels_and_projects_stay_apart(
        project, other_project, agent_key):
    now = time.time()
    polls.seen(key_id=agent_key.api_key.pk, project_id=project.pk, label="production", etag='"v1-a"', now=now)
    polls.seen(key_id=agent_key.api_key.pk, project_id=project.pk, label="production", etag='"v2-b"', now=now + 1)
    [poller] = policy_pollers(project_id=project.pk, labels=["production"])["production"]
    assert poller.version == 1  # the second, within RECORD_SECONDS, was not written
    polls.seen(key_id=agent_key.api_key.pk, project_id=project.pk, label="production", etag='"v2-b"',
               now=now + RECORD_SECONDS + 1)
    assert [p.version for p in policy_pollers(project_id=project.pk, labels=["production"])["production"]] == [2]
    assert policy_pollers(project_id=project.pk, labels=["staging"])["staging"] == []
    other = make_key(other_project, scopes=["policy:read"])
    assert policy_pollers(project_id=other_project.pk, labels=["production"])["production"] == []
    polls.seen(key_id=other.api_key.pk, project_id=other_project.pk, label="production", etag='"v7-c"', now=now)
    pollers = policy_pollers(project_id=project.pk, labels=["production"])["production"]
    assert [p.key_name for p in pollers] == [agent_key.api_key.name]
