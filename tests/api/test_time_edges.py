"""Times at the ends of what Python can hold (issue 24, item 3): a range that ends in year 1, a
transcript that starts in year 0 or 10000 once in UTC. Each is a 2xx or a 400 naming the field."""

from __future__ import annotations

import pytest

from tests.admin.builders import make_policy
from tests.api.conftest import KeyClient
from tests.factories import make_key

EDGES = ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "9999-12-31T23:59:59Z"]


@pytest.fixture
def reader(project):
    return KeyClient(make_key(project, scopes=["read", "policy:read", "ingest"]).secret)


@pytest.mark.parametrize("path", ["/api/v1/overview", "/api/v1/sessions", "/api/v1/tools/stats"])
@pytest.mark.parametrize("moment", EDGES)
@pytest.mark.parametrize("which", ["start", "end"])
def test_ranges_at_the_ends_of_time_are_answered(reader, path, moment, which):
    response = reader.get(path, {which: moment})
    assert response.status_code in (200, 400), response.content[:300]
    if response.status_code == 400:  # not a time in UTC (year 0 or 10000)
        assert response.json()["field"] == which and moment.endswith(("+05:00", "-05:00"))
    elif "start" in response.json():
        assert "1970-01-01" <= response.json()["start"][:10] <= "3000-01-01"


@pytest.mark.parametrize("moment", EDGES)
def test_a_simulation_over_a_range_at_the_ends_of_time_is_started(reader, project, moment):
    make_policy(project)
    response = reader.post_json("/api/v1/simulations", {"draft": True, "end": moment})
    assert response.status_code in (200, 202, 400), response.content[:300]
    if response.status_code == 400:
        assert response.json()["field"] == "end"


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00",
                                    "0001-01-01T00:00:00Z", "3000-01-01T00:00:00Z"])
def test_a_transcript_timestamp_outside_the_years_held_is_a_400_naming_it(reader, moment):
    body = {"format": "openai_chat", "session_id": "s-edge", "timestamp": moment,
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    response = reader.post_json("/api/v1/transcripts", body)
    assert response.status_code == 400, response.content[:300]
    assert response.json()["field"] == "timestamp" and "1970-01-01 to 3000-01-01" in response.json()["detail"]


def test_the_transcript_mappers_hold_times_to_the_bounds_of_the_ingest_validation():
    from api.transcripts import common
    from toolscope.telemetry.services import events

    assert (common.EARLIEST, common.LATEST) == (events.EARLIEST, events.LATEST)
