"""The API under a schema fuzzer (issue 11, item 8): schemathesis over /api/v1/schema against
granian and a real Celery worker, as production runs them (tests/e2e/fuzzing.py says what runs
and which checks, and why).

Bounded for CI: the schema's examples, the coverage phase and up to MAX_EXAMPLES fuzzed cases per
operation, positive and negative (about 1,500 requests, a minute), derandomized with a fixed seed
so a failure reproduces. bench/fuzz_api.py runs the same with 10,000+ requests."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.e2e.fuzzing import LiveStack, batches_outcome, fuzz_project_create, fuzz_run, fuzz_schema
from toolscope.policies.models import Recommendation, Simulation

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 60


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.fixture
def stack(transactional_db, tmp_path):
    with LiveStack(_database_url(), tmp_path) as live:
        yield live


def test_the_fuzzed_api_answers_as_described_and_stores_every_batch(stack):
    project = fuzz_project_create()

    tally = fuzz_run(fuzz_schema(stack.base_url, project, max_examples=MAX_EXAMPLES))
    outcome = batches_outcome(project.project_id)

    assert tally.errors == [], tally.report()
    assert tally.server_errors == 0, f"{tally.statuses}\n{tally.report()}\n{stack.describe()}"
    assert tally.failures == {}, tally.report()
    assert outcome["failed"] == 0, outcome
    assert outcome["quarantined_events"] == 0, outcome
    assert outcome["pending"] == outcome["processing"] == 0, outcome
    # The run reached every operation, and got past validation: it stored batches, and /policy
    # and /artifacts answered their documents.
    assert len(tally.by_operation) == 22, tally.by_operation
    # Every simulation the fuzzer started, with whatever document it uploaded, ran or was
    # cancelled by it: none failed in the worker.
    failed = Simulation.objects.filter(project_id=project.project_id, status="failed").values_list("error", flat=True)
    assert list(failed) == [], list(failed)
    # And every recommendation it asked for, whatever range, agent, model and limit.
    failed = Recommendation.objects.filter(project_id=project.project_id, status="failed").values_list("error",
                                                                                                         flat=True)
    assert list(failed) == [], list(failed)
    assert outcome["done"] > 0 and tally.statuses[200] > 0 and tally.statuses[304] > 0, (outcome, tally.statuses)
