"""Shared fixtures. Tenancy tests use three named people: owner, member and outsider."""

from __future__ import annotations

import pytest

# Pure tests (SDK, engine, transcripts) run without Django (-p no:django), so nothing here
# imports models at module level.
ADMIN, VIEWER = "admin", "viewer"
# scripts/test runs the suite on pytest-xdist workers with --dist loadgroup: the tests that start
# real processes (marked slow) all go to one worker, one after another, so that two stacks of
# servers and Celery workers never share the machine's cores; the other tests spread over the rest.
PROCESSES_GROUP = "processes"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.xdist_group(PROCESSES_GROUP))


def _factories():
    from tests import factories

    return factories


@pytest.fixture
def project(db):
    return _factories().make_project("acme")


@pytest.fixture
def other_project(db):
    return _factories().make_project("globex")


@pytest.fixture
def owner(project):
    user = _factories().make_user("owner")
    _factories().make_member(project, user, ADMIN)
    return user


@pytest.fixture
def member(project):
    user = _factories().make_user("member")
    _factories().make_member(project, user, VIEWER)
    return user


@pytest.fixture
def outsider(other_project):
    user = _factories().make_user("outsider")
    _factories().make_member(other_project, user, ADMIN)
    return user


@pytest.fixture
def superuser(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("root", "root@example.com", "root-password")


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """pytest-django's test database, emptied after each transactional test (transactional_db,
    live_server, django_db(transaction=True)) by DELETE instead of Django's TRUNCATE on PostgreSQL.

    TRUNCATE gives every table, partition and index a new file: with the day partitions
    (telemetry/partitions.py, 4 tables x 38 days and their indexes, some 1,300 relations) it took
    5-10 s per test, however little the test stored. DELETE empties the same tables in a fraction
    of a second; the foreign keys are deferrable (checked at the flush's commit) and neither resets
    sequences (Django's flush between tests passes reset_sequences=False)."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def delete(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade or not tables:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return ["SET CONSTRAINTS ALL DEFERRED;",
                *(f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in tables)]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DatabaseOperations, "sql_flush", delete)
        yield
