"""The per-key rate limit is a sliding one-minute window (api/throttling.py): a burst at a minute's
end still counts at the next minute's start, and a client under the limit is never refused.

The clock is the throttle's own (`api.throttling.time`), set by the test: no test waits."""

from __future__ import annotations

import math
import time as real_time

import pytest

from api import throttling
from tests.api.conftest import KeyClient
from tests.factories import make_key
from tests.policies.wsgi_client import redis_cache  # noqa: F401 - a fixture

URL = "/api/v1/tools"
LIMIT = 10
MINUTE = 60 * 29_000_000  # the start of some minute


class Clock:
    """Stands in for the time module where the rate limit reads it; everything else is real."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str):
        return getattr(real_time, name)


@pytest.fixture(params=["locmem", "redis"])
def cache_kind(request):
    if request.param == "redis":
        request.getfixturevalue("redis_cache")  # one round trip per request (get_many_and_count)
    else:
        from django.core.cache import cache

        cache.clear()
    return request.param


@pytest.fixture
def clock(monkeypatch):
    clock = Clock(MINUTE)
    monkeypatch.setattr(throttling, "time", clock)
    return clock


@pytest.fixture
def agent(project, settings, cache_kind):
    settings.API_RATE_LIMIT_PER_MINUTE = LIMIT
    return KeyClient(make_key(project).secret)


def statuses(agent, count: int) -> list[int]:
    return [agent.get(URL).status_code for _ in range(count)]


def test_the_limit_at_a_minutes_end_is_not_granted_again_at_the_next_minutes_start(agent, clock):
    clock.now = MINUTE + 59
    assert statuses(agent, LIMIT) == [200] * LIMIT
    clock.now = MINUTE + 60.5  # a fixed window would start counting from zero here
    response = agent.get(URL)
    assert response.status_code == 429
    assert response.json()["code"] == "throttled"
    assert int(response["Retry-After"]) >= 1


def test_the_previous_minute_weighs_less_as_this_one_goes_on(agent, clock):
    clock.now = MINUTE + 59
    statuses(agent, LIMIT)
    clock.now = MINUTE + 60.5
    assert statuses(agent, 1) == [429]  # counted: this minute holds 1
    clock.now = MINUTE + 90  # half of the previous minute's 10 still weigh: 1 + 5, room for 4
    assert statuses(agent, 5) == [200, 200, 200, 200, 429]


def test_waiting_what_retry_after_says_is_enough(agent, clock):
    clock.now = MINUTE + 30
    statuses(agent, LIMIT)
    refused = agent.get(URL)
    assert refused.status_code == 429
    clock.now += int(refused["Retry-After"])
    assert agent.get(URL).status_code == 200


@pytest.mark.parametrize("per_minute", [LIMIT // 2, LIMIT - 1])
def test_a_client_spreading_its_requests_under_the_limit_is_never_refused(agent, clock, per_minute):
    answers = []
    for i in range(4 * per_minute):  # four minutes, evenly spaced
        clock.now = MINUTE + 60 * (i + 0.5) / per_minute
        answers.append(agent.get(URL).status_code)
    assert set(answers) == {200}


def test_no_minute_long_span_admits_twice_the_limit(agent, clock):
    # The fixed window's worst case: all at the end of one minute, then all at the next start.
    admitted = []
    for now in (MINUTE + 59.9, MINUTE + 60.1):
        clock.now = now
        admitted += [status for status in statuses(agent, LIMIT) if status == 200]
    assert len(admitted) == LIMIT


def test_retry_after_is_when_the_estimate_leaves_room():
    # 10 counted in the previous minute, 1 in this one, 0.1 elapsed: 1 + 10 * (1 - t) <= 9 from t = 0.2.
    wait = throttling.retry_after(current=1, previous=10, elapsed=0.1, limit=10)
    assert math.isclose(wait, 0.1 * 60)
    # This minute alone over the limit: into the next one, until its share has shrunk enough.
    wait = throttling.retry_after(current=12, previous=0, elapsed=0.5, limit=10)
    assert math.isclose(wait, (0.5 + 1 - 9 / 12) * 60)
