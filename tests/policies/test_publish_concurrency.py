"""Two publishes at once never get the same number: the project's row lock serialises them."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from tests.admin.builders import make_policy
from tests.factories import make_project, make_user
from tests.policies.builders import make_catalog
from toolscope.policies.models import PolicyAuditEntry, PolicyLabel, PolicyVersion
from toolscope.policies.services import publish as publish_module
from toolscope.policies.services.publish import policy_publish


def _slow(build):
    # Widens the window between reading the last number and inserting the next one: without the
    # lock, both threads would read the same last number here and one insert would fail.
    def slow_build(*, policy):
        time.sleep(0.3)
        return build(policy=policy)

    return slow_build


def _publish_at_once(policy, user, count: int) -> tuple[list[int], list[BaseException]]:
    barrier, numbers, errors = threading.Barrier(count), [], []

    def run(index: int) -> None:
        try:
            barrier.wait()
            numbers.append(policy_publish(policy=policy, user=user, comment=f"thread {index}").number)
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return numbers, errors


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("already_published", [0, 2], ids=["first-publish", "later-publish"])
def test_concurrent_publishes_get_distinct_consecutive_numbers(monkeypatch, already_published):
    project = make_project("race")
    policy = make_policy(project, always_on=[make_catalog(project, ["bash"])["bash"]])
    user = make_user("publisher")
    for _ in range(already_published):
        policy_publish(policy=policy, user=user)
    monkeypatch.setattr(publish_module, "policy_document_build", _slow(publish_module.policy_document_build))

    numbers, errors = _publish_at_once(policy, user, count=3)

    assert errors == []
    expected = [already_published + n for n in (1, 2, 3)]
    assert sorted(numbers) == expected
    assert sorted(PolicyVersion.objects.filter(project=project).values_list("number", flat=True)) == [
        *range(1, already_published + 1), *expected,
    ]
    assert PolicyLabel.objects.get(project=project, name="production").version.number == expected[-1]
    assert PolicyAuditEntry.objects.filter(project=project, action="published").count() == already_published + 3
