"""Warm polls answered from process memory (api/pollmemory.py), invalidated through Redis
(toolscope/invalidation.py): whatever changes is seen by every process on its very next poll.

Each `serve()` is one web process with its own memory, subscription thread and Redis connections;
Redis is the real one. `remembering()` waits until a process holds its lease (not a timed
assertion: it only waits for the subscription to be up) and checks the poll came from memory.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from api import pollmemory
from tests.admin.builders import make_policy
from tests.factories import make_key
from tests.policies.builders import make_catalog
from tests.policies.poll_process import DJANGO
from tests.policies.wsgi_client import Served, redis_cache, serve  # noqa: F401 - redis_cache is a fixture
from toolscope.telemetry.services.api_keys import api_key_revoke

pytestmark = pytest.mark.usefixtures("redis_cache")


def remembering(secret: str, etag: str, served: Served | None = None) -> Served:
    """A process whose memory answers this key's poll: Django caches the key and the document,
    a round trip fills memory, the next poll comes from memory."""
    served = served or serve()
    served.get(secret, etag=etag)
    served.get(secret, etag=etag)
    memory = served.layer.memory
    assert memory is not None and memory.subscription.leased.wait(10), "no lease"
    if memory.etag(*_entry(served, secret), time.time()) is None:
        served.get(secret, etag=etag)  # the fill raced with the subscription's start: again
    hits = memory.hits
    answer = served.get(secret, etag=etag)
    assert (answer.status, answer.by_django, memory.hits) == (304, False, hits + 1)
    return served


def _entry(served: Served, secret: str) -> tuple[str, str]:
    from api.fastpath import _entry_key

    return _entry_key(f"Bearer {secret}"), "production"


def test_a_warm_poll_is_answered_from_memory(agent_key, policy, publish, django_assert_num_queries):
    version = publish(policy)
    served = remembering(agent_key.secret, version.etag)
    with django_assert_num_queries(0):
        answer = served.get(agent_key.secret, etag=version.etag)
    assert (answer.status, answer.headers["ETag"], answer.by_django) == (304, version.etag, False)


def test_a_publish_is_seen_by_every_process_on_its_next_poll(agent_key, policy, tools, publish):
    old = publish(policy)
    processes = [remembering(agent_key.secret, old.etag) for _ in range(3)]
    policy.always_on.add(tools["git_diff"])
    new = publish(policy)
    for served in processes:
        answer = served.get(agent_key.secret, etag=old.etag)
        assert (answer.status, answer.headers["ETag"]) == (200, new.etag)


def test_a_process_that_cannot_take_the_invalidation_is_waited_out(agent_key, policy, tools, publish):
    old = publish(policy)
    quick, stuck = remembering(agent_key.secret, old.etag), remembering(agent_key.secret, old.etag)
    policy.always_on.add(tools["git_diff"])
    with stuck.layer.memory.subscription.handling:  # its thread cannot handle the message
        new = publish(policy)
        for served in (stuck, quick):
            answer = served.get(agent_key.secret, etag=old.etag)
            assert (answer.status, answer.headers["ETag"]) == (200, new.etag)


def test_a_rollback_is_seen_on_the_next_poll(agent_key, policy, tools, publish, move):
    first = publish(policy)
    policy.always_on.add(tools["git_diff"])
    second = publish(policy)
    served = remembering(agent_key.secret, second.etag)
    move(first)
    answer = served.get(agent_key.secret, etag=second.etag)
    assert (answer.status, answer.headers["ETag"]) == (200, first.etag)
    remembering(agent_key.secret, first.etag, served)


def test_a_revoked_key_is_refused_on_its_next_poll(agent_key, policy, publish, django_capture_on_commit_callbacks):
    version = publish(policy)
    processes = [remembering(agent_key.secret, version.etag) for _ in range(2)]
    with django_capture_on_commit_callbacks(execute=True):
        api_key_revoke(api_key=agent_key.api_key)
    for served in processes:
        answer = served.get(agent_key.secret, etag=version.etag)
        assert (answer.status, answer.by_django) == (401, True)


def test_a_deleted_key_is_refused_on_its_next_poll(agent_key, policy, publish, django_capture_on_commit_callbacks):
    version = publish(policy)
    served = remembering(agent_key.secret, version.etag)
    with django_capture_on_commit_callbacks(execute=True):
        agent_key.api_key.delete()
    answer = served.get(agent_key.secret, etag=version.etag)
    assert (answer.status, answer.by_django) == (401, True)


def test_a_key_of_another_project_never_gets_this_project_s_etag_from_memory(agent_key, other_project, policy,
                                                                             publish):
    ours = publish(policy)
    make_catalog(other_project, ["globex_deploy"])
    theirs = publish(make_policy(other_project))
    their_key = make_key(other_project, scopes=["policy:read"])
    served = remembering(their_key.secret, theirs.etag)
    remembering(agent_key.secret, ours.etag, served)  # the same process remembers both projects
    answer = served.get(their_key.secret, etag=ours.etag)
    assert (answer.status, answer.headers["ETag"]) == (200, theirs.etag)
    assert json.loads(answer.body)["project"] == "globex"


def test_the_rate_limit_holds_within_its_bound_across_processes(agent_key, policy, publish, settings, monkeypatch):
    limit, batch = 12, 3
    settings.API_RATE_LIMIT_PER_MINUTE = limit
    monkeypatch.setattr(pollmemory, "COUNT_BATCH", batch)
    if time.time() % 60 > 50:  # keep the polls inside one rate-limit window
        time.sleep(60 - time.time() % 60 + 0.1)
    version = publish(policy)
    processes = [remembering(agent_key.secret, version.etag) for _ in range(2)]
    answers = [processes[i % 2].get(agent_key.secret, etag=version.etag) for i in range(30)]
    admitted = sum(served.statuses.count(304) for served in processes)
    assert limit <= admitted <= limit + len(processes) * (batch - 1)
    for served in processes:  # a process refuses every poll after its first refusal
        own = served.statuses
        assert set(own[own.index(429):]) == {429}
    assert all(a.by_django and int(a.headers["Retry-After"]) >= 1 for a in answers if a.status == 429)
    assert sum(served.layer.memory.hits for served in processes) > len(processes)  # beyond remembering()


def test_without_a_lease_polls_make_the_round_trip(agent_key, policy, publish):
    version = publish(policy)
    served = remembering(agent_key.secret, version.etag)
    memory = served.layer.memory
    with memory.subscription.handling:  # no message handled, so no lease renewed, meanwhile
        memory.subscription.trusted_until = 0.0  # as when the subscription is lost
        hits = memory.hits
        answer = served.get(agent_key.secret, etag=version.etag)
    assert (answer.status, answer.by_django, memory.hits) == (304, False, hits)


def test_the_memory_can_be_turned_off(agent_key, policy, publish, settings):
    settings.POLICY_POLL_MEMORY = False
    version = publish(policy)
    served = serve()
    answers = [served.get(agent_key.secret, etag=version.etag) for _ in range(3)]
    assert [(a.status, a.by_django) for a in answers] == [(304, True), (304, False), (304, False)]
    assert served.layer.memory is None


class WebProcess:
    """tests/policies/poll_process.py in a child process, on the test's cache."""

    def __init__(self, settings) -> None:
        cache = settings.CACHES["default"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.policies.poll_process", cache["LOCATION"], cache["KEY_PREFIX"]],
            cwd=Path(__file__).resolve().parents[2], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def ask(self, *command: str) -> dict:
        self.process.stdin.write(" ".join(command) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture
def web_process(settings):
    process = WebProcess(settings)
    yield process
    process.close()


def remembered_in(web_process: WebProcess, secret: str, etag: str) -> None:
    """Django (in this process) caches the key and the document; the child's round trip fills its
    memory; its next poll comes from memory."""
    serve().get(secret, etag=etag)
    assert web_process.ask("poll", secret, etag)["status"] == 304
    assert web_process.ask("lease")["leased"]
    hits = web_process.ask("poll", secret, etag)["hits"]
    if hits == 0:  # the fill raced with the subscription's start: again
        hits = web_process.ask("poll", secret, etag)["hits"]
    assert web_process.ask("poll", secret, etag) == {"status": 304, "hits": hits + 1}


def test_another_process_sees_a_publish_on_its_next_poll(agent_key, policy, tools, publish, web_process):
    old = publish(policy)
    remembered_in(web_process, agent_key.secret, old.etag)
    policy.always_on.add(tools["git_diff"])
    publish(policy)
    assert web_process.ask("poll", agent_key.secret, old.etag)["status"] == DJANGO  # not 304: Django's turn


def test_another_process_refuses_a_revoked_key_on_its_next_poll(agent_key, policy, publish, web_process,
                                                                django_capture_on_commit_callbacks):
    version = publish(policy)
    remembered_in(web_process, agent_key.secret, version.etag)
    with django_capture_on_commit_callbacks(execute=True):
        api_key_revoke(api_key=agent_key.api_key)
    assert web_process.ask("poll", agent_key.secret, version.etag)["status"] == DJANGO


def test_a_publish_waits_out_another_process_that_cannot_take_it(agent_key, policy, tools, publish, web_process):
    old = publish(policy)
    remembered_in(web_process, agent_key.secret, old.etag)
    web_process.ask("stall")
    policy.always_on.add(tools["git_diff"])
    publish(policy)  # returns once the stalled process's lease has run out
    assert web_process.ask("poll", agent_key.secret, old.etag)["status"] == DJANGO
    web_process.ask("resume")
