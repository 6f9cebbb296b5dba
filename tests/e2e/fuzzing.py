"""The API fuzzer's pieces, shared by tests/e2e/test_fuzz_api.py (CI) and bench/fuzz_api.py (the
10,000-request run): a live stack as production runs it (granian, a Celery worker, a private
redis-server), a project worth fuzzing, a schemathesis run over /api/v1/schema, and the outcome
of the batches the run stored.

What the run exercises: every operation of the OpenAPI description with the key of a project that
has a catalog, a published policy (production and staging: /policy answers 200 and 304,
/policy/resolve runs context rules with a regex), a compaction rule (processing builds artifacts)
and an artifact (/artifacts/{id} answers 200 for every other case, 404 for the rest). Phases:
the schema's examples, schemathesis's coverage phase (each constraint's edges, just inside and
just past, and the negative cases for every field), then fuzzing in positive and negative modes.
No stateful phase: no answer names a resource another operation reads (a batch id has no
endpoint, an artifact's id comes from processing), so schemathesis would find no links to follow.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import schemathesis
from schemathesis.engine import events, from_schema
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Why these checks (schemathesis's names):
# - not_a_server_error: no 5xx, whatever is sent.
# - response_schema_conformance, status_code_conformance, content_type_conformance: the answer's
#   body, status and media type are the ones the description documents for the operation (every
#   error is documented, as the Error schema; a 304 has no body and documents none).
# - bad_data_rejected (negative_data_rejection): what the description calls invalid is refused
#   with a 4xx (413 for too many events), so the validation is no looser than the description.
# - good_data_accepted (positive_data_acceptance): what it calls valid is accepted, or a 404 for
#   a label or an artifact that does not exist; so the description is no looser than the
#   validation either. A 409 too: applying a recommendation the worker has not finished is the
#   run's state, not the request's data. Not for /transcripts, whose messages are any
#   provider's, as sent.
# - missing_required_header and ignored_auth: no key is a 401, never data.
# Not used: response_headers_conformance (Retry-After is only on 429/503, which this run, its
# rate limit off and its database up, never sees).
CHECKS = ("not_a_server_error", "response_schema_conformance", "status_code_conformance",
          "content_type_conformance", "bad_data_rejected", "good_data_accepted", "missing_required_header",
          "ignored_auth")
SERVER_ERROR = "not_a_server_error"


@dataclass
class Tally:
    """What a fuzz run saw: requests by status, and each failed check once per distinct problem."""

    statuses: Counter = field(default_factory=Counter)
    by_operation: Counter = field(default_factory=Counter)
    failures: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (operation, check, title) -> repro
    failed_checks: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)  # schemathesis could not run a case (network, schema)

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def server_errors(self) -> int:
        return sum(count for status, count in self.statuses.items() if status >= 500)

    @property
    def violations(self) -> int:
        """Failed checks other than a 5xx (which not_a_server_error counts): distinct cases."""
        return sum(count for name, count in self.failed_checks.items() if name != SERVER_ERROR)

    def report(self, limit: int = 20) -> str:
        lines = [f"{operation}: {check}: {title}\n{repro}"
                 for (operation, check, title), repro in itertools.islice(self.failures.items(), limit)]
        return "\n\n".join(lines + self.errors[:limit])


NEGATIVE_STATUSES = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
POSITIVE_STATUSES = ["2xx", "304", "404", "409"]
LOOSE = {"POST /api/v1/transcripts"}


@schemathesis.check
def bad_data_rejected(ctx, response, case):
    """negative_data_rejection, except that a batch with some valid events is answered 202: then
    the bad ones are answered `rejected`, one by one."""
    if response.status_code == 202 and _rejected_events(response):
        return None
    return negative_data_rejection(ctx, response, case)


@schemathesis.check
def good_data_accepted(ctx, response, case):
    if case.operation.label in LOOSE:
        return None
    return positive_data_acceptance(ctx, response, case)


def _rejected_events(response) -> int:
    try:
        return int(response.json().get("rejected", 0))
    except (ValueError, AttributeError, TypeError):
        return 0


# Every event a case sends gets an id of its own: ids are per project, and the generators send
# "0" or the example's id again and again, which the API answers `duplicate` and stores nothing
# of, so the worker would see the first of each kind only. Only a valid id is replaced, by
# another valid one: a case's validity is kept. (A global hook: schemathesis dispatches
# before_call to those only.)
_fresh_ids = itertools.count()
FRESH_ID_FIELDS = {"POST /api/v1/ingest": "id", "POST /api/v1/transcripts": "session_id"}


@schemathesis.hook
def before_call(context, case, kwargs):
    key = FRESH_ID_FIELDS.get(case.operation.label)
    body = case.body if isinstance(case.body, dict) else {}
    if key is None:
        return
    targets = body.get("events") if key == "id" else [body]
    for target in targets if isinstance(targets, list) else []:
        if isinstance(target, dict) and _valid_id(target.get(key)):
            target[key] = f"fz-{next(_fresh_ids)}"


def _valid_id(value) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 160 and "\x00" not in value and bool(value.strip())


# -- the project -------------------------------------------------------------------------------

TOOLS = [
    {"name": "read_file", "description": "Read a file from the workspace",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "bash", "description": "Run a shell command",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}},
    {"name": "git_diff", "description": "Show the working tree's changes", "input_schema": {"type": "object"}},
    {"name": "run_tests", "description": "Run the test suite", "input_schema": {"type": "object"}},
    {"name": "web_fetch", "description": "Fetch a URL", "input_schema": {"type": "object"}},
]


@dataclass(frozen=True)
class FuzzProject:
    project_id: int
    secret: str
    artifact_id: str
    etag: str


def fuzz_project_create(slug: str = "fuzz") -> FuzzProject:
    """A project with a key holding every scope, a catalog, a published policy and an artifact."""
    from toolscope.policies.models import CompactionRule, ContextRule, Policy, SelectionMode, Tool, ToolGroup
    from toolscope.policies.services.catalog import catalog_upsert
    from toolscope.policies.services.publish import policy_publish
    from toolscope.telemetry.models import Artifact, Project
    from toolscope.telemetry.services.api_keys import api_key_create

    project = Project.objects.create(slug=slug, name=slug.title())
    key = api_key_create(project=project, name="fuzz", scopes=["ingest", "policy:read", "admin"])
    catalog_upsert(project=project, definitions=TOOLS)
    tools = {tool.name: tool for tool in Tool.objects.filter(project=project)}
    policy = Policy.objects.create(project=project, mode=SelectionMode.CONTEXT_RULES)
    policy.always_on.set([tools["read_file"], tools["bash"]])
    git = ToolGroup.objects.create(policy=policy, name="git")
    git.tools.set([tools["git_diff"]])
    testing = ToolGroup.objects.create(policy=policy, name="testing")
    testing.tools.set([tools["run_tests"]])
    ContextRule.objects.create(policy=policy, name="git", keywords=["diff", "commit"]).groups.set([git])
    ContextRule.objects.create(policy=policy, name="testing", keywords=[], regex=r"tests?/\w+\.py").groups.set(
        [testing])
    CompactionRule.objects.create(policy=policy, tools="bash*", max_tokens=16)
    policy_publish(policy=policy, user=None, label="staging")
    version = policy_publish(policy=policy, user=None)
    artifact = Artifact.objects.create(project=project, original="line\n" * 200, compacted="line\n[… omitted]",
                                       tokens_before=400, tokens_after=4, strategy="head_tail")
    return FuzzProject(project_id=project.pk, secret=key.secret, artifact_id=str(artifact.pk), etag=version.etag)


def batches_outcome(project_id: int, timeout: float = 120.0) -> dict[str, int]:
    """Once the worker has settled every batch of the project: batches by status, and the number
    of quarantined events (each one an event the API accepted that the worker could not store)."""
    from toolscope.telemetry.models import BatchStatus, IngestBatch, QuarantinedEvent

    batches = IngestBatch.objects.filter(project_id=project_id)
    deadline = time.monotonic() + timeout
    unsettled = [BatchStatus.PENDING, BatchStatus.PROCESSING]
    while batches.filter(status__in=unsettled).exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    counts = Counter(batches.values_list("status", flat=True))
    outcome = {str(status): counts.get(status, 0) for status in BatchStatus.values}
    outcome["quarantined_events"] = QuarantinedEvent.objects.filter(project_id=project_id).count()
    return outcome


# -- the stack ---------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveStack:
    """redis-server, granian (the web service's command in docker-compose.yml) and a Celery
    worker on `database_url`, as local processes; logs in `log_dir`."""

    def __init__(self, database_url: str, log_dir: Path, web_workers: int = 1) -> None:
        self.log_dir, self.web_workers = log_dir, web_workers
        self.redis_port, self.web_port = free_port(), free_port()
        self.base_url = f"http://127.0.0.1:{self.web_port}"
        self.env = {
            **os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "TOOLSCOPE_ENV": "test", "DEBUG": "false",
            "LOG_LEVEL": "WARNING", "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "CACHE_URL": f"redis://127.0.0.1:{self.redis_port}/1",
            "API_RATE_LIMIT_PER_MINUTE": "0",  # a rate limit would answer 429 to most of the run
        }
        self.processes: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> LiveStack:
        try:
            self._start("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no"])
            self._wait(lambda: _port_open(self.redis_port), "redis-server")
            self._start("web", [str(BIN / "granian"), "--interface", "wsgi", "--host", "127.0.0.1",
                                "--port", str(self.web_port), "--workers", str(self.web_workers),
                                "--blocking-threads", "1", "toolscope.wsgi:application"])
            self._start("worker", [str(BIN / "celery"), "-A", "toolscope", "worker", "--concurrency", "1",
                                   "--without-gossip", "--without-mingle", "--loglevel", "INFO"])
            self._wait(self._web_up, "granian")
            self._wait(lambda: "ready." in self.log("worker"), "the Celery worker")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        for process in reversed(self.processes.values()):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=10)

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def describe(self) -> str:
        return "\n".join(f"--- {name}\n{self.log(name)[-3000:]}" for name in self.processes)

    def _start(self, name: str, args: list[str]) -> None:
        with (self.log_dir / f"{name}.log").open("a") as out:
            self.processes[name] = subprocess.Popen(args, cwd=REPO, env=self.env, stdout=out,
                                                    stderr=subprocess.STDOUT, start_new_session=True)

    def _wait(self, condition, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            dead = [name for name, process in self.processes.items() if process.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start ({', '.join(dead) or 'timeout'}):\n{self.describe()}")
            time.sleep(0.1)

    def _web_up(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


# -- the run -----------------------------------------------------------------------------------

def fuzz_schema(base_url: str, project: FuzzProject, *, max_examples: int, seed: int = 1) -> schemathesis.BaseSchema:
    """One schemathesis worker: with two, hypothesis's lambda descriptions call ast.parse from
    both threads, which CPython 3.11.7 does not survive (SystemError: AST constructor recursion
    depth mismatch)."""
    config = schemathesis.Config()
    config.update(seed=seed, max_failures=None)
    run = config.projects.override
    # Every case of every operation, whatever failed before it: the run counts, it does not stop.
    run.update(base_url=base_url, headers={"Authorization": f"Bearer {project.secret}"}, workers=1,
               continue_on_failure=True)
    run.phases.update(phases=["examples", "coverage", "fuzzing"])
    run.checks.update(included_check_names=list(CHECKS))
    run.checks.negative_data_rejection.expected_statuses = NEGATIVE_STATUSES
    run.checks.positive_data_acceptance.expected_statuses = POSITIVE_STATUSES
    # Derandomized: the same seed draws the same cases, so a CI failure reproduces.
    run.generation.update(modes=list(schemathesis.GenerationMode), max_examples=max_examples, deterministic=True)
    schema = schemathesis.openapi.from_url(f"{base_url}/api/v1/schema", config=config, wait_for_schema=30)
    _use_known_ids(schema, project)
    return schema


def _use_known_ids(schema: schemathesis.BaseSchema, project: FuzzProject) -> None:
    """Every other /artifacts case asks for the project's artifact (a random UUID is always a 404),
    and every other /policy case that sends If-None-Match sends the current ETag (304)."""
    turns = itertools.count()

    @schema.hook
    def map_path_parameters(context, path_parameters):
        if path_parameters and "artifact_id" in path_parameters and next(turns) % 2:
            path_parameters["artifact_id"] = project.artifact_id
        return path_parameters

    @schema.hook
    def map_headers(context, headers):
        if headers and "If-None-Match" in headers and next(turns) % 2:
            headers["If-None-Match"] = f'"{project.etag.strip(chr(34))}"'
        return headers


def fuzz_run(schema: schemathesis.BaseSchema) -> Tally:
    tally = Tally()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            _count(tally, event)
        elif isinstance(event, events.NonFatalError):
            tally.errors.append(f"{event.label}: {event.info.format()}")
        elif isinstance(event, events.FatalError):
            raise event.exception
    return tally


def _count(tally: Tally, event: events.ScenarioFinished) -> None:
    recorder = event.recorder
    for interaction in recorder.interactions.values():
        if interaction.response is not None:
            tally.statuses[interaction.response.status_code] += 1
            tally.by_operation[recorder.label] += 1
    for case_id, nodes in recorder.checks.items():
        for node in nodes:
            if node.failure_info is None:
                continue
            failure = node.failure_info.failure
            tally.failed_checks[node.name] += 1
            last_line = failure.message.strip().rsplit("\n", 1)[-1]
            key = (recorder.label, node.name, f"{failure.title}: {last_line}")
            if key not in tally.failures:
                tally.failures[key] = f"{node.failure_info.code_sample}\n-> {_answer(recorder, case_id)}"


def _answer(recorder, case_id: str) -> str:
    interaction = recorder.interactions.get(case_id)
    if interaction is None or interaction.response is None:
        return "no response"
    response = interaction.response
    return f"{response.status_code} {response.content[:300]!r}"
