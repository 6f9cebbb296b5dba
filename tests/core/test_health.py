"""/healthz says the process is up; /readyz says whether its dependencies answer."""

from django.test import override_settings


def test_healthz_answers_without_touching_dependencies(client, db, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_reports_database_and_broker(client, db):
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ready"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["database"]["vendor"] == "postgresql"
    assert body["checks"]["broker"]["ok"] is True
    assert body["checks"]["broker"]["mode"] == "broker"


# Port 1 on loopback refuses connections at once.
@override_settings(CELERY_TASK_ALWAYS_EAGER=False, CELERY_BROKER_URL="redis://127.0.0.1:1/0")
def test_readyz_is_unavailable_when_the_broker_is_unreachable(client, db):
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "unavailable"
    assert body["checks"]["broker"]["ok"] is False
    assert "error" in body["checks"]["broker"]
    assert body["checks"]["database"]["ok"] is True
