"""The promise behind every 202: an event the API accepts is stored by a real worker.

Property test: batches of events generated from the OpenAPI description of /api/v1/ingest (every
event type, values at the edges the schema states) and of values just past those edges and past
what the columns hold (issue 11's fuzz findings), posted through the API; a real Celery worker
processes them (tests/ingest_strategies.py). Whatever the API answered `accepted` for is in the
database afterwards, nothing is quarantined and no batch fails."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.api.conftest import KeyClient
from tests.e2e.conftest import wait_for
from tests.factories import make_key
from tests.ingest_strategies import assert_accepted_are_stored, batches
from toolscope.telemetry.models import BatchStatus, IngestBatch

pytestmark = pytest.mark.slow


@pytest.fixture
def api(project):
    return KeyClient(make_key(project, scopes=["ingest"]).secret)


# One project for all examples, as one agent's stream: ids repeat across examples as re-sends do.
# No shrinking: a failure is reported as generated (shrinking batches against a database is slow).
@settings(max_examples=40, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(batch=batches)
def test_every_event_the_api_accepts_is_stored_by_a_real_worker(worker, api, project, batch):
    response = api.generic("POST", "/api/v1/ingest", json.dumps({"events": batch}), content_type="application/json")
    assert_accepted_are_stored(response, project, process=processed_by_the_worker)


def processed_by_the_worker(batch_id: int) -> None:
    done = (BatchStatus.DONE, BatchStatus.FAILED)
    wait_for(lambda: IngestBatch.objects.get(pk=batch_id).status in done, 60, "the worker to process the batch")
