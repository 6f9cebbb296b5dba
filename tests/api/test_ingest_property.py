"""Property: every event the API accepts is stored (processed in-process here, for many
examples; tests/e2e/test_accepted_is_stored.py runs fewer through a real worker)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.ingest_strategies import assert_accepted_are_stored, batches
from toolscope.telemetry.services.processing import batch_process

pytestmark = pytest.mark.django_db(transaction=True)


# One project for all examples, as one agent's stream: ids repeat across examples as re-sends do.
# No shrinking: a failure is reported as generated (shrinking batches against a database is slow).
@settings(max_examples=200, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(batch=batches)
def test_every_event_the_api_accepts_is_stored(api, project, batch):
    response = api.generic("POST", "/api/v1/ingest", json.dumps({"events": batch}), content_type="application/json")
    assert_accepted_are_stored(response, project, process=lambda batch_id: batch_process(batch_id=batch_id))
