"""Every answer under /api/ is JSON: unknown paths, wrong methods, bodies too large, unexpected
errors (with a request id the log has too) and an unreachable database (503, Retry-After)."""

from __future__ import annotations

import gzip
import logging
import socket

import psycopg
import pytest
from django.db import connection

from api.middleware import DATABASE_RETRY_AFTER_SECONDS
from tests.api.conftest import KeyClient
from tests.factories import make_key


def assert_json_error(response, status: int, code: str) -> dict:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code
    assert body["detail"]
    return body


@pytest.fixture(params=[False, True], ids=["production", "debug"])
def debug(request, settings):
    # DEBUG is what made Django answer with its HTML debug pages.
    settings.DEBUG = request.param
    return request.param


def test_an_unknown_api_path_is_a_json_404_with_a_request_id(api, debug):
    response = api.get("/api/v1/no-such-thing")
    assert_json_error(response, 404, "not_found")
    assert len(response["X-Request-ID"]) == 32


def test_a_page_outside_the_api_keeps_djangos_404(client, db):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")


def test_a_method_the_endpoint_does_not_have_is_a_json_405(api, debug):
    response = api.delete("/api/v1/ingest")
    assert_json_error(response, 405, "method_not_allowed")
    assert "POST" in response["Allow"]


def test_a_body_over_the_limit_is_a_json_413(api, settings):
    settings.INGEST_MAX_BODY_BYTES = 2048
    response = api.post_json("/api/v1/ingest", {"events": [{"type": "session", "id": "x" * 3000}]})
    assert_json_error(response, 413, "payload_too_large")


@pytest.fixture
def failing_catalog(monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("the catalog broke")

    monkeypatch.setattr("api.views.tools.tool_list", broken)


def test_an_unexpected_error_is_a_json_500_whose_request_id_is_logged(project, failing_catalog, caplog, debug):
    agent = KeyClient(make_key(project).secret, raise_request_exception=False)
    with caplog.at_level(logging.ERROR, logger="api.middleware"):
        response = agent.get("/api/v1/tools")
    body = assert_json_error(response, 500, "server_error")
    assert body["request_id"] == response["X-Request-ID"]
    assert "the catalog broke" not in response.content.decode()  # no internals in the answer
    [record] = [r for r in caplog.records if r.name == "api.middleware"]
    assert record.request_id == body["request_id"]
    assert body["request_id"] in record.getMessage()
    assert record.exc_info[0] is RuntimeError


def test_a_database_error_is_logged_without_the_values_it_quotes(project, monkeypatch, caplog, debug):
    from django.db import DataError

    value = "sk-live-" + "secret-4242"  # as data reaches an error: not in any source line

    def broken(**kwargs):
        raise DataError(f'value "{value}" is out of range for type integer')

    monkeypatch.setattr("api.views.tools.tool_list", broken)
    agent = KeyClient(make_key(project).secret, raise_request_exception=False)
    with caplog.at_level(logging.ERROR, logger="api.middleware"):
        response = agent.get("/api/v1/tools")
    assert_json_error(response, 500, "server_error")
    [record] = [r for r in caplog.records if r.name == "api.middleware"]
    logged = record.getMessage() + (logging.Formatter().formatException(record.exc_info) if record.exc_info else "")
    assert "DataError" in logged and "broken" in logged  # the class and where
    assert "sk-live-secret-4242" not in logged


def test_a_sane_request_id_from_the_client_is_kept(project, failing_catalog):
    agent = KeyClient(make_key(project).secret, raise_request_exception=False)
    response = agent.get("/api/v1/tools", HTTP_X_REQUEST_ID="trace-4bf92f3577b34da6")
    assert response.json()["request_id"] == response["X-Request-ID"] == "trace-4bf92f3577b34da6"


@pytest.mark.parametrize("sent", ["", "a" * 129, "id\r\nSet-Cookie: x=1", "<script>"])
def test_a_request_id_that_is_not_sane_is_replaced(project, failing_catalog, sent):
    agent = KeyClient(make_key(project).secret, raise_request_exception=False)
    response = agent.get("/api/v1/tools", HTTP_X_REQUEST_ID=sent)
    assert response["X-Request-ID"] != sent
    assert len(response["X-Request-ID"]) == 32


def test_error_answers_carry_a_request_id_and_successful_ones_do_not(project):
    # The policy poll's 304 is answered without Django (api/fastpath.py) and must not differ.
    assert "X-Request-ID" in KeyClient(None).get("/api/v1/tools")
    ok = KeyClient(make_key(project).secret).get("/api/v1/tools")
    assert ok.status_code == 200
    assert "X-Request-ID" not in ok


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


@pytest.fixture
def database_down(transactional_db):
    """The default connection pointed at a port where nothing listens, as while PostgreSQL restarts."""
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(_closed_port()))
    yield
    connection.close()
    connection.settings_dict.clear()
    connection.settings_dict.update(saved)


def test_an_unreachable_database_is_a_json_503_with_retry_after(database_down, debug, caplog):
    agent = KeyClient("ts_abcdefgh_" + "x" * 40, raise_request_exception=False)
    with caplog.at_level(logging.ERROR, logger="api.middleware"):
        response = agent.get("/api/v1/tools")
    body = assert_json_error(response, 503, "database_unavailable")
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER_SECONDS)
    assert any(r.request_id == body["request_id"] for r in caplog.records if r.name == "api.middleware")


def test_a_connection_the_database_dropped_is_a_json_503(transactional_db, project):
    # What a PostgreSQL restart does to a web process's open connection.
    agent = KeyClient(make_key(project).secret, raise_request_exception=False)
    assert agent.get("/api/v1/tools").status_code == 200  # the connection is open and used
    with psycopg.connect(_dsn()) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])
    response = agent.get("/api/v1/tools")
    assert_json_error(response, 503, "database_unavailable")
    assert response["Retry-After"] == str(DATABASE_RETRY_AFTER_SECONDS)
    connection.close()  # as Django does at the end of a request that broke its connection


def _dsn() -> str:
    params = connection.get_connection_params()
    return " ".join(f"{key}={params[key]}" for key in ("host", "port", "user", "dbname") if params.get(key))


# --- bodies ---------------------------------------------------------------------------------

def test_gzip_with_data_after_its_end_is_400(api):
    body = gzip.compress(b'{"events": [{"type": "session", "id": "s1"}]}') + b"garbage"
    response = api.generic("POST", "/api/v1/ingest", body, content_type="application/json",
                           HTTP_CONTENT_ENCODING="gzip")
    body = assert_json_error(response, 400, "parse_error")
    assert "after the end of the gzip stream" in body["detail"]


def test_a_second_gzip_member_is_400(api):
    member = gzip.compress(b'{"events": [{"type": "session", "id": "s1"}]}')
    response = api.generic("POST", "/api/v1/ingest", member + member, content_type="application/json",
                           HTTP_CONTENT_ENCODING="gzip")
    assert_json_error(response, 400, "parse_error")


def nested(depth: int) -> bytes:
    metadata = b'{"a": ' * depth + b"1" + b"}" * depth
    return b'{"events": [{"type": "session", "id": "s1", "metadata": ' + metadata + b"}]}"


@pytest.mark.parametrize("path", ["/api/v1/ingest", "/api/v1/transcripts", "/api/v1/tools"])
def test_a_body_nested_past_254_levels_is_400(api, path):
    method = "PUT" if path.endswith("tools") else "POST"
    response = api.generic(method, path, nested(300), content_type="application/json")
    body = assert_json_error(response, 400, "parse_error")
    assert "nested deeper than 254 levels" in body["detail"]
