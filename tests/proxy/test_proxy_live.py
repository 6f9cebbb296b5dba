"""toolscope-proxy end to end: the console script as a user starts it, a real toolscope (live
server, Celery worker, PostgreSQL) publishing the policy and receiving the telemetry, the official
`openai` and `anthropic` clients in front and a provider on 127.0.0.1 behind."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anthropic
import openai
import pytest

from tests.e2e.conftest import ResponseDroppingProxy, ingest_queue, wait_for, worker  # noqa: F401 -- fixtures
from tests.factories import make_key, make_project, make_user
from tests.gateway.serving import free_port
from tests.proxy.provider import USAGE, Provider, app, serving
from tests.proxy.test_proxy import KEY, TOOLS, anthropic_tools, openai_tools
from toolscope.policies.models import ContextRule, Policy, Tool, ToolGroup
from toolscope.policies.services.catalog import catalog_upsert
from toolscope.policies.services.publish import policy_publish
from toolscope.telemetry.models import BatchStatus, IngestBatch, Session, ToolCall, Turn

pytestmark = pytest.mark.slow

BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"


@pytest.fixture
def project(transactional_db):
    project = make_project("proxied")
    catalog_upsert(project=project, definitions=[{"name": name, "description": text, "input_schema": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
        for name, text in TOOLS.items()])
    policy = Policy.objects.get_or_create(project=project)[0]
    policy.mode = "context_rules"
    policy.save()
    policy.always_on.set(Tool.objects.filter(project=project, name="read_file"))
    group = ToolGroup.objects.create(policy=policy, name="testing")
    group.tools.set(Tool.objects.filter(project=project, name="run_tests"))
    rule = ContextRule.objects.create(policy=policy, name="testing", keywords=["test", "tests"])
    rule.groups.set([group])
    policy_publish(policy=policy, user=make_user())
    return project


@contextmanager
def proxy_process(toolscope_url: str, key: str, upstream: str, tmp_path: Path, *, mode: str = "enforce",
                  log_name: str = "proxy.log") -> Iterator[str]:
    port = free_port()
    log = tmp_path / log_name
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "TOOLSCOPE_URL": toolscope_url,
           "TOOLSCOPE_API_KEY": key, "TOOLSCOPE_AGENT_NAME": "coder-behind-proxy"}
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(BIN / "toolscope-proxy"), "--mode", mode, "--port", str(port), "--openai-base-url", upstream,
             "--anthropic-base-url", upstream, "--spool-dir", str(tmp_path / "spool"), "--log-level", "INFO"],
            stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            wait_for(lambda: _listening(port) or process.poll() is not None, 30, "the proxy to listen")
            assert process.poll() is None, log.read_text()
            yield f"http://127.0.0.1:{port}"
        finally:
            process.send_signal(signal.SIGTERM)  # a clean stop ends the sessions and flushes
            process.wait(timeout=30)
    assert KEY not in log.read_text()  # the provider key is never logged


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def processed() -> bool:
    return IngestBatch.objects.exists() and not IngestBatch.objects.exclude(status=BatchStatus.DONE).exists()


def test_the_proxy_applies_the_published_policy_and_toolscope_records_what_passed(
        live_server, worker, project, tmp_path):  # noqa: F811 -- the worker fixture
    provider = Provider()
    key = make_key(project, scopes=("ingest", "policy:read")).secret
    with serving(app(provider)) as upstream, proxy_process(live_server.url, key, upstream, tmp_path) as base:
        oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
        history = [{"role": "user", "content": "Run the tests of the parser"}]
        first = oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=history,
                                           extra_headers={"x-toolscope-session-id": "chat-1"})
        call = first.choices[0].message.tool_calls[0]
        history += [first.choices[0].message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": "# The parser\nRun `pytest`."}]
        oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=history,
                                   extra_headers={"x-toolscope-session-id": "chat-1"})
        sent_chat = [[tool["function"]["name"] for tool in received.body["tools"]] for received in provider.received]
        an = anthropic.Anthropic(base_url=base, api_key=KEY)
        list(an.messages.create(model="claude-sonnet-4-5", max_tokens=100, tools=anthropic_tools(), stream=True,
                                messages=[{"role": "user", "content": "Read the README"}]))
        sent_messages = [tool["name"] for tool in provider.received[-1].body["tools"]]
    assert sent_chat == [["read_file", "run_tests"], ["read_file", "run_tests"]]
    assert sent_messages == ["read_file"]
    assert all(received.headers.get("authorization") == f"Bearer {KEY}" for received in provider.received)

    wait_for(processed, 60, "the proxy's telemetry processed")
    chat = Session.objects.get(project=project, client_id="chat-1")
    assert chat.metadata == {"gateway": "toolscope-proxy", "proxy_mode": "enforce"}
    assert chat.agent_name == "coder-behind-proxy" and chat.ended_at is not None
    turns = list(Turn.objects.filter(session=chat).order_by("index"))
    assert [sorted(tool["name"] for tool in turn.advertised_set.tools) for turn in turns] == [
        ["read_file", "run_tests"], ["read_file", "run_tests"]]
    assert turns[0].task_message == "Run the tests of the parser" and turns[0].model == "gpt-4.1"
    assert (turns[0].input_tokens, turns[0].output_tokens, turns[0].cached_tokens) == (
        USAGE["input"], USAGE["output"], USAGE["cached"])
    calls = list(ToolCall.objects.filter(session=chat))
    assert [(c.tool_name, c.turn_index, c.output, c.arguments) for c in calls] == [
        ("read_file", 0, "# The parser\nRun `pytest`.", {"path": "README.md"})]
    assert calls[0].turn_id == turns[0].pk
    streamed = Session.objects.exclude(pk=chat.pk).get(project=project)
    (turn,) = Turn.objects.filter(session=streamed)
    assert [tool["name"] for tool in turn.advertised_set.tools] == ["read_file"]
    assert turn.input_tokens == USAGE["input"] and turn.model == "claude-sonnet-4-5"
    # The provider key went to the provider only: not into what toolscope stored.
    assert KEY not in json.dumps(list(IngestBatch.objects.values_list("payload", flat=True)), default=str)


def conversation(base: str, session_id: str) -> None:
    """Two requests of one conversation through the proxy: a call, then its result."""
    oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
    history = [{"role": "user", "content": "Run the tests of the parser"}]
    headers = {"x-toolscope-session-id": session_id}
    first = oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=history, extra_headers=headers)
    call = first.choices[0].message.tool_calls[0]
    history += [first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "# The parser"}]
    oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=history, extra_headers=headers)


def test_nothing_recorded_is_lost_while_toolscope_is_down(live_server, worker, project, tmp_path):  # noqa: F811
    provider = Provider()
    key = make_key(project, scopes=("ingest", "policy:read")).secret
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with serving(app(provider)) as upstream:
        with proxy_process(down, key, upstream, tmp_path, mode="observe", log_name="down.log") as base:
            conversation(base, "while-down")  # the agent is served all the same
        spooled = list((tmp_path / "spool").glob("*.json.gz"))
        assert spooled, (tmp_path / "down.log").read_text()
        assert not Session.objects.filter(project=project).exists()
        # Restarted with toolscope back: the spool goes first.
        with proxy_process(live_server.url, key, upstream, tmp_path, mode="observe", log_name="up.log"):
            wait_for(lambda: Session.objects.filter(project=project, client_id="while-down").exists() and processed(),
                     60, "the spooled telemetry delivered and processed")
    session = Session.objects.get(project=project, client_id="while-down")
    assert session.ended_at is not None and session.metadata["proxy_mode"] == "observe"
    assert Turn.objects.filter(session=session).count() == 2
    assert list(ToolCall.objects.filter(session=session).values_list("tool_name", "output")) == [
        ("read_file", "# The parser")]
    # observe sends what the agent sent: all four tools, both times.
    assert all(len(received.body["tools"]) == len(TOOLS) for received in provider.received)


def test_the_compose_proxy_command_serves_and_records(live_server, worker, project, tmp_path):  # noqa: F811
    """docker-compose.yml's `proxy` service as a local process: its command and environment, with
    the hosts it names pointed at this test's toolscope and provider, and its spool in tmp_path."""
    from tests.deploy import recipe
    from tests.deploy.test_recipe import TEST_VARIABLES

    service = recipe.load_compose({**TEST_VARIABLES, "TOOLSCOPE_PROXY_API_KEY": "set-below"})["services"]["proxy"]
    argv, env = recipe.as_argv(service["command"]), recipe.service_environment(service)
    port = free_port()
    argv[argv.index("--port") + 1], argv[argv.index("--host") + 1] = str(port), "127.0.0.1"
    argv[argv.index("--spool-dir") + 1] = str(tmp_path / "spool")
    provider = Provider()
    with serving(app(provider)) as upstream:
        env.update({"TOOLSCOPE_URL": live_server.url, "TOOLSCOPE_API_KEY": make_key(project).secret,
                    "TOOLSCOPE_PROXY_OPENAI_BASE_URL": upstream, "TOOLSCOPE_PROXY_ANTHROPIC_BASE_URL": upstream,
                    "PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path)})
        with (tmp_path / "compose-proxy.log").open("w") as out:
            process = subprocess.Popen([str(BIN / argv[0]), *argv[1:]], env=env, stdout=out, stderr=subprocess.STDOUT)
            try:
                wait_for(lambda: _listening(port) or process.poll() is not None, 30, "the proxy to listen")
                assert process.poll() is None, (tmp_path / "compose-proxy.log").read_text()
                conversation(f"http://127.0.0.1:{port}", "from-compose")
            finally:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)
    wait_for(lambda: Session.objects.filter(project=project, client_id="from-compose").exists() and processed(),
             60, "the compose proxy's telemetry processed")
    session = Session.objects.get(project=project, client_id="from-compose")
    assert session.metadata == {"gateway": "toolscope-proxy", "proxy_mode": "observe"}
    assert Turn.objects.filter(session=session).count() == 2


def test_shadow_mode_shows_what_enforcing_would_have_sent_and_missed(live_server, worker, project, tmp_path):  # noqa: F811
    from django.test import Client as BrowserClient
    from django.urls import reverse

    from tests.factories import make_member

    provider = Provider()
    key = make_key(project, scopes=("ingest", "policy:read")).secret
    with serving(app(provider)) as upstream, \
            proxy_process(live_server.url, key, upstream, tmp_path, mode="shadow", log_name="shadow.log") as base:
        oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
        oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(),
                                   messages=[{"role": "user", "content": "Save my work with git_commit"}],
                                   extra_headers={"x-toolscope-session-id": "shadowed"})
        oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), extra_headers={
            "x-toolscope-session-id": "shadowed"}, messages=[
            {"role": "user", "content": "Save my work with git_commit"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "git_commit", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "[main 1a2b3c] saved"}])
    assert all(len(received.body["tools"]) == len(TOOLS) for received in provider.received)  # unchanged
    wait_for(lambda: Session.objects.filter(project=project, client_id="shadowed").exists() and processed(),
             60, "the shadow telemetry processed")
    session = Session.objects.get(project=project, client_id="shadowed")
    # The shadow follows the conversation as it happened: once the model called git_commit, the
    # policy keeps it (sticky_discovered), as it would after a call it had let through.
    assert [turn.shadow_tools for turn in Turn.objects.filter(session=session).order_by("index")] == [
        ["read_file"], ["read_file", "git_commit"]]
    viewer = BrowserClient()
    viewer.force_login(make_member(project, make_user()).user)
    page = viewer.get(reverse("dashboard:session", args=[project.slug, "shadowed"])).content.decode()
    assert "the agent sent 8 tool definitions where the published policy would have sent 3" in page
    assert "the policy would have missed git_commit" in page


class Gate:
    """A port that refuses connections until opened, then forwards them to `target`: toolscope
    down, then back, at one address."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target, self.port = target, free_port()
        self.listener: socket.socket | None = None

    def open(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self.listener is not None
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=ResponseDroppingProxy._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=ResponseDroppingProxy._pipe, args=(upstream, client), daemon=True).start()

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()


def test_a_running_proxy_loses_nothing_while_toolscope_is_away(live_server, worker, project, tmp_path):  # noqa: F811
    """toolscope unreachable while the agent works (the proxy serves it all the same and spools),
    then back at the same address: the running proxy delivers what it kept, oldest first."""
    from urllib.parse import urlparse

    provider = Provider()
    key = make_key(project, scopes=("ingest", "policy:read")).secret
    address = urlparse(live_server.url)
    gate = Gate((address.hostname, address.port))
    try:
        with serving(app(provider)) as upstream, proxy_process(
                f"http://127.0.0.1:{gate.port}", key, upstream, tmp_path, mode="observe", log_name="away.log") as base:
            conversation_id = "while-away"
            conversation(base, conversation_id)
            wait_for(lambda: list((tmp_path / "spool").glob("*.json.gz")), 60, "the undelivered telemetry spooled")
            assert not Session.objects.filter(project=project).exists()
            gate.open()  # toolscope is back
            wait_for(lambda: Session.objects.filter(project=project, client_id=conversation_id).exists()
                     and Turn.objects.filter(session__client_id=conversation_id).count() == 2
                     and ToolCall.objects.filter(session__client_id=conversation_id).exists() and processed(),
                     90, "the spooled telemetry delivered by the running proxy")
    finally:
        gate.close()
    calls = ToolCall.objects.filter(session__client_id=conversation_id)
    assert list(calls.values_list("tool_name", "output")) == [("read_file", "# The parser")]
