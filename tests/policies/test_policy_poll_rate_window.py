"""Policy polls answered in front of Django (api/fastpath.py, api/pollmemory.py) obey the same
sliding window as every other request (api/throttling.py): the polls of a minute's end still
count at the next minute's start. The clock is the one those modules read, set by the test."""

from __future__ import annotations

import pytest

from api import fastpath, pollmemory, throttling
from tests.api.test_throttling import MINUTE, Clock
from tests.policies.wsgi_client import redis_cache, serve  # noqa: F401 - redis_cache is a fixture

pytestmark = pytest.mark.usefixtures("redis_cache")
LIMIT = 6


@pytest.fixture
def clock(monkeypatch):
    clock = Clock(MINUTE + 59)
    for module in (throttling, fastpath, pollmemory):
        monkeypatch.setattr(module, "time", clock)
    return clock


@pytest.mark.parametrize("memory", [True, False], ids=["from-memory", "round-trip"])
def test_polls_at_a_minutes_end_still_count_at_the_next_minutes_start(agent_key, policy, publish, settings,
                                                                       clock, memory):
    settings.API_RATE_LIMIT_PER_MINUTE = LIMIT
    settings.POLICY_POLL_MEMORY = memory
    version = publish(policy)
    served = serve()
    answers = [served.get(agent_key.secret, etag=version.etag) for _ in range(LIMIT)]
    assert [a.status for a in answers] == [304] * LIMIT
    assert not all(a.by_django for a in answers)  # the layer answered some itself
    clock.now = MINUTE + 60.5  # a fixed window would admit LIMIT more here
    refused = served.get(agent_key.secret, etag=version.etag)
    assert (refused.status, refused.by_django) == (429, True)
    clock.now = MINUTE + 90  # half the previous minute's polls have slid out
    assert served.get(agent_key.secret, etag=version.etag).status == 304
