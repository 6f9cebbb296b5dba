"""A wrong key, a missing scope or a wrong URL is said out loud: logged once at WARNING with the
server's message, reported by flush(), and raised by check()."""

from __future__ import annotations

import logging

import pytest
from toolscope_agent import AuthenticationError, ScopeError, ToolscopeError, UnreachableError

from tests.sdk.server import Action, free_port

INVALID_KEY = {"detail": "Invalid API key."}


def event(n: int) -> dict[str, object]:
    return {"type": "tool_call", "id": f"e{n}", "session_id": "s", "turn_index": 0, "tool_name": "t"}


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "toolscope_agent" and r.levelno == logging.WARNING]


def test_a_refused_key_is_logged_once_at_warning_with_the_servers_message(server, client, caplog):
    server.then(*[Action(status=401, body=INVALID_KEY)] * 3)
    with caplog.at_level(logging.WARNING, logger="toolscope_agent"):
        for n in range(3):
            client.record(event(n))
            assert not client.flush(timeout=5), "refused events are not a success"
    assert len(warnings_of(caplog)) == 1
    assert "refused this client's API key (HTTP 401: Invalid API key.)" in warnings_of(caplog)[0]
    assert [r for r in caplog.records if r.levelno > logging.WARNING] == []
    assert client.stats.failed == 3


def test_a_key_without_the_ingest_scope_is_logged_the_same_way(server, client, caplog):
    server.then(Action(status=403, body={"detail": "This API key lacks the 'ingest' scope."}))
    with caplog.at_level(logging.WARNING, logger="toolscope_agent"):
        client.record(event(0))
        assert not client.flush(timeout=5)
    assert warnings_of(caplog) == [
        ("toolscope: the server refused this client's API key (HTTP 403: This API key lacks the 'ingest' scope.); "
        "nothing is being recorded. Check the key and its ingest scope (Client.check() raises with the reason)")]


def test_flush_is_true_again_once_events_are_accepted(server, client):
    server.then(Action(status=401, body=INVALID_KEY))
    client.record(event(0))
    assert not client.flush(timeout=5)
    client.record(event(1))
    assert client.flush(timeout=5)


def test_close_reports_refused_events_too(server, client):
    server.then(Action(status=401, body=INVALID_KEY))
    client.record(event(0))
    assert not client.close(timeout=5)


# --- check() -----------------------------------------------------------------------------------


def test_check_passes_when_each_scope_is_held(server, client):
    server.then(Action(status=400, body={"detail": "'events' is empty.", "field": "events"}),
                Action(status=404, body={"detail": "No artifact with this id in the key's project."}))
    client.check(scopes=("ingest", "policy:read"))
    assert [(r.method, r.path, r.body) for r in server.requests] == [
        ("POST", "/api/v1/ingest", b'{"events":[]}'), ("GET", "/api/v1/artifacts/" + "0" * 24, b"")]


def test_check_raises_on_a_bad_key_with_the_servers_message(server, client):
    server.then(Action(status=401, body=INVALID_KEY))
    with pytest.raises(AuthenticationError) as raised:
        client.check()
    assert (raised.value.status, raised.value.message) == (401, "Invalid API key.")
    assert isinstance(raised.value, ToolscopeError)


def test_check_raises_on_a_missing_scope(server, client):
    server.then(Action(status=400, body={"detail": "'events' is empty."}),
                Action(status=403, body={"detail": "This API key lacks the 'policy:read' scope."}))
    with pytest.raises(ScopeError, match="lacks the 'policy:read' scope"):
        client.check(scopes=("ingest", "policy:read"))


def test_check_raises_when_nothing_listens(make_client):
    client = make_client(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(UnreachableError, match="ConnectError") as raised:
        client.check()
    assert raised.value.status is None


def test_check_raises_when_what_answers_is_not_toolscope(server, client):
    server.then(Action(status=404, body="<html>Not Found</html>"))
    with pytest.raises(UnreachableError, match="does not answer as a toolscope server"):
        client.check()


def test_check_is_not_retried(server, make_client):
    client = make_client(server.url, max_attempts=5)
    server.then(Action(status=503, body={"detail": "maintenance"}))
    with pytest.raises(ToolscopeError, match="maintenance") as raised:
        client.check()
    assert type(raised.value) is ToolscopeError and len(server.requests) == 1


def test_check_knows_only_the_scopes_it_can_prove(client):
    with pytest.raises(ValueError, match="unknown scope 'admin'"):
        client.check(scopes=("admin",))


def test_a_synchronous_call_with_a_bad_key_raises_the_specific_error(server, client):
    server.then(Action(status=401, body=INVALID_KEY))
    with pytest.raises(AuthenticationError):
        client.register_tools([{"name": "t", "input_schema": {"type": "object"}}])


def test_an_unreachable_url_raises_unreachable_from_synchronous_calls(make_client):
    client = make_client(f"http://127.0.0.1:{free_port()}", max_attempts=1)
    with pytest.raises(UnreachableError):
        client.upload_transcript({"messages": []})
