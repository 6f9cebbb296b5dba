"""Published versions, raw batches and telemetry rows can be read in the admin, never changed."""

from __future__ import annotations

import json

import pytest
from django.utils.html import escape

from tests import factories
from tests.admin.builders import make_batch, make_version
from tests.admin.conftest import admin_url, change_url
from toolscope.policies.models import PolicyVersion
from toolscope.telemetry.models import IngestBatch


@pytest.fixture
def version(project):
    return make_version(project, 3)


@pytest.fixture
def batch(project):
    return make_batch(project, {"events": [{"type": "tool_call", "client_id": "call-1", "tool": "bash"}]})


def _pretty(value) -> str:
    return escape(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


def test_a_policy_version_page_offers_neither_save_nor_delete(root_client, version):
    content = root_client.get(change_url(version)).content.decode()
    assert 'name="_save"' not in content
    assert 'name="_continue"' not in content
    assert admin_url(PolicyVersion, "delete", version.pk) not in content


def test_a_policy_version_page_shows_the_document_pretty_printed(root_client, version):
    content = root_client.get(change_url(version)).content.decode()
    assert _pretty(version.document) in content
    assert 'name="document"' not in content


def test_posting_to_a_policy_version_is_refused_and_changes_nothing(root_client, version):
    response = root_client.post(change_url(version), {"comment": "rewritten", "document": "{}"})
    assert response.status_code == 403
    stored = PolicyVersion.objects.get(pk=version.pk)
    assert (stored.comment, stored.document) == ("", version.document)


def test_a_policy_version_cannot_be_deleted_through_the_admin(root_client, version):
    response = root_client.post(admin_url(PolicyVersion, "delete", version.pk), {"post": "yes"})
    assert response.status_code == 403
    assert PolicyVersion.objects.filter(pk=version.pk).exists()


def test_posting_to_an_ingest_batch_is_refused_and_changes_nothing(root_client, batch):
    response = root_client.post(change_url(batch), {"payload": '{"events": []}', "status": "done"})
    assert response.status_code == 403
    stored = IngestBatch.objects.get(pk=batch.pk)
    assert (stored.payload, stored.status) == (batch.payload, "pending")


def test_an_ingest_batch_cannot_be_added_or_deleted(root_client, batch):
    assert root_client.post(admin_url(IngestBatch, "add"), {"payload": "{}"}).status_code == 403
    assert root_client.post(admin_url(IngestBatch, "delete", batch.pk), {"post": "yes"}).status_code == 403
    assert IngestBatch.objects.count() == 1


def test_an_ingest_batch_page_shows_the_payload_pretty_printed_in_a_pre(root_client, batch):
    content = root_client.get(change_url(batch)).content.decode()
    assert f">{_pretty(batch.payload)}</pre>" in content
    assert 'name="_save"' not in content


def test_the_batch_list_offers_no_delete_action(root_client, batch):
    response = root_client.get(admin_url(IngestBatch, "changelist"))
    assert "delete_selected" not in response.content.decode()


def test_a_tool_call_page_shows_arguments_and_output_without_a_form(root_client, project):
    turn = factories.make_turn(factories.make_session(project))
    call = factories.make_tool_call(turn, "bash", arguments={"cmd": "ls -la"}, output="<total 0>")
    content = root_client.get(change_url(call)).content.decode()
    assert _pretty(call.arguments) in content
    assert "&lt;total 0&gt;" in content
    assert 'name="_save"' not in content
