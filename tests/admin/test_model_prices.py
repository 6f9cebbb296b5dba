"""The admin's project prices (issue 26, item 1): saving them has a worker price the project's
stored sessions again (tests/telemetry/test_repricing.py has the service and the command)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.dashboard.test_session_cost import million, post, session_events
from tests.telemetry.test_repricing import NEGOTIATED, stored
from toolscope.telemetry.models import ModelPrice, Project
from toolscope.telemetry.services.costs import nanos

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def processed(project):
    post(project, session_events(timezone.now().replace(microsecond=0) - timedelta(hours=1)))


def test_saving_a_price_in_the_admin_prices_the_sessions_again_in_a_worker(
        root_client, settings, project, processed, django_capture_on_commit_callbacks):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the worker's task runs in this process
    url = reverse("admin:telemetry_project_change", args=[project.pk])
    data = change_form_data(root_client.get(url))
    prefix = next(name[:-len("-TOTAL_FORMS")] for name in data
                  if name.endswith("-TOTAL_FORMS") and "price" in name.lower())
    data[f"{prefix}-TOTAL_FORMS"] = "1"
    valid_from = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")
    data.update({f"{prefix}-0-{name}": str(value) for name, value in NEGOTIATED.items()})
    data.update({f"{prefix}-0-valid_from_0": valid_from[:10], f"{prefix}-0-valid_from_1": valid_from[11:],
                 f"{prefix}-0-valid_from": valid_from, f"{prefix}-0-project": str(project.pk)})
    with django_capture_on_commit_callbacks(execute=True):
        response = root_client.post(url, data, follow=True)
    assert response.status_code == 200 and ModelPrice.objects.filter(project=project).count() == 1, (
        response.context["errors"] if response.context and "errors" in response.context else response)
    assert "being priced again" in response.content.decode()
    assert stored(project)[0] == nanos(million((100, "1"), (2900, "1.25"), (100, "5")))
    # Saving the project with its prices unchanged prices nothing again.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        root_client.post(url, change_form_data(root_client.get(url)), follow=True)
    assert not any("reprice" in repr(callback) for callback in callbacks)
    assert Project.objects.filter(pk=project.pk).exists()


def change_form_data(response) -> dict[str, str]:
    """The POST an unchanged admin change form sends: its fields' values and the inlines'
    management forms, read from the page."""
    html = response.content.decode()
    data: dict[str, str] = {}
    for tag in re.findall(r"<input[^>]*>", html):
        name = re.search(r'name="([^"]+)"', tag)
        kind = re.search(r'type="([^"]+)"', tag)
        if not name or (kind and kind.group(1) in ("submit", "button", "file")):
            continue
        if kind and kind.group(1) == "checkbox" and "checked" not in tag:
            continue
        value = re.search(r'value="([^"]*)"', tag)
        data[name.group(1)] = value.group(1) if value else ("on" if kind and kind.group(1) == "checkbox" else "")
    for name, body in re.findall(r'<select[^>]*name="([^"]+)"[^>]*>(.*?)</select>', html, re.S):
        chosen = re.search(r'<option value="([^"]*)"[^>]*selected', body)
        data[name] = chosen.group(1) if chosen else ""
    for name, body in re.findall(r'<textarea[^>]*name="([^"]+)"[^>]*>(.*?)</textarea>', html, re.S):
        data[name] = body.strip()
    return {name: value.replace("&quot;", '"').replace("&amp;", "&") for name, value in data.items()
            if "__prefix__" not in name}
