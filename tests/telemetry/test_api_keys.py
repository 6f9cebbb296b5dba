"""API keys: shown once, stored as a hash, verified in constant time, revocable."""

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from tests.factories import make_key
from toolscope.telemetry.models import ApiKey
from toolscope.telemetry.services.api_keys import api_key_create, api_key_revoke, api_key_verify


def _all_key_column_values() -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiKey._meta.db_table}")
        return repr(cursor.fetchall())


def test_the_secret_never_appears_in_the_database(project):
    created = make_key(project)
    stored = _all_key_column_values()
    secret_part = created.secret.split("_", 2)[2]  # ts_<prefix>_<secret>; the secret may hold "_"
    assert secret_part not in stored
    assert created.secret not in stored
    assert created.api_key.prefix in stored


def test_a_created_key_verifies_and_carries_its_project_and_scopes(project):
    created = make_key(project, scopes=["ingest"])
    key = api_key_verify(raw=created.secret)
    assert key is not None
    assert key.project == project
    assert key.has_scope("ingest")
    assert not key.has_scope("policy:read")


def test_verification_records_last_use(project):
    created = make_key(project)
    assert created.api_key.last_used_at is None
    api_key_verify(raw=created.secret)
    created.api_key.refresh_from_db()
    assert created.api_key.last_used_at is not None


def test_a_revoked_key_fails_verification(project):
    created = make_key(project)
    api_key_revoke(api_key=created.api_key)
    assert api_key_verify(raw=created.secret) is None


@pytest.mark.parametrize("mangle", [
    lambda s: s[:-1] + ("A" if s[-1] != "A" else "B"),  # wrong secret
    lambda s: s.replace("ts_", "xx_", 1),  # wrong format
    lambda s: s.rsplit("_", 1)[0] + "_",  # empty secret
    lambda s: "",
])
def test_a_wrong_key_fails_verification(project, mangle):
    created = make_key(project)
    assert api_key_verify(raw=mangle(created.secret)) is None


def test_admin_scope_implies_every_scope(project):
    key = make_key(project, scopes=["admin"]).api_key
    assert key.has_scope("ingest") and key.has_scope("policy:read")


def test_unknown_scopes_are_refused(project):
    with pytest.raises(ValidationError, match="scopes"):
        api_key_create(project=project, name="bad", scopes=["ingest", "write:everything"])
    assert not ApiKey.objects.exists()
