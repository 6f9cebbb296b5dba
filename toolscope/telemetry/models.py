"""Projects, their members and API keys, and the telemetry agents send them."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from toolscope_agent.engine.compaction import artifact_id

from toolscope.telemetry.error_patterns import default_error_patterns, validate_error_patterns
from toolscope.telemetry.fields import JSONTextField
from toolscope.telemetry.retention import (
    DEFAULT_RETENTION_DAYS,
    DEFAULT_ROLLUP_RETENTION_DAYS,
    MAX_RETENTION_DAYS,
    MAX_ROLLUP_RETENTION_DAYS,
    expiry_day,
)


class Encoding(models.TextChoices):
    O200K_BASE = "o200k_base", "o200k_base (GPT-4o and later)"
    CL100K_BASE = "cl100k_base", "cl100k_base (GPT-4, GPT-3.5)"


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    encoding = models.CharField(max_length=32, choices=Encoding.choices, default=Encoding.O200K_BASE)
    context_window = models.PositiveIntegerField(
        default=200_000, validators=[MinValueValidator(1024)], help_text="Tokens the model accepts."
    )
    tool_error_patterns = models.JSONField(
        default=default_error_patterns, blank=True, validators=[validate_error_patterns],
        help_text='Tell a failed tool call by its output when the event has no status: a list of '
        '{"name", "regex" (RE2, matched at the output\'s start with ^), "kind": "error" (status becomes '
        'error) or "unflagged" (status stays ok; counted as error text, not flagged)}. See docs/events.md.',
    )
    retention_days = models.PositiveSmallIntegerField(
        default=DEFAULT_RETENTION_DAYS, db_default=DEFAULT_RETENTION_DAYS,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_RETENTION_DAYS)],
        help_text="Days raw data (tool calls, turns, artifacts, ingest batches, sessions) is kept. A change "
        "applies to data stored from then on; stored rows keep the day they expire on.",
    )
    rollup_retention_days = models.PositiveSmallIntegerField(
        default=DEFAULT_ROLLUP_RETENTION_DAYS, db_default=DEFAULT_ROLLUP_RETENTION_DAYS,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_ROLLUP_RETENTION_DAYS)],
        help_text="Days the hourly rollups (what the dashboard charts) are kept; at least the raw data's.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        super().clean()
        if self.rollup_retention_days is not None and self.retention_days is not None \
                and self.rollup_retention_days < self.retention_days:
            raise ValidationError({"rollup_retention_days": "Keep rollups at least as long as the raw data."})


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    EDITOR = "editor", "Editor"
    ADMIN = "admin", "Admin"


class ModelPrice(models.Model):
    """A project's own price for a model (negotiated, or a model genai-prices does not know), in
    dollars per million tokens, from `valid_from` on (toolscope/prices.py: it wins over the
    library's for that model)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="model_prices")
    model = models.CharField(max_length=100, help_text="The model's name exactly as requests report it.")
    provider = models.CharField(max_length=32, blank=True, help_text="e.g. anthropic, openai; blank: any.")
    input_mtok = models.DecimalField(max_digits=12, decimal_places=6, validators=[MinValueValidator(0)],
                                     help_text="Uncached input, $ per million tokens.")
    output_mtok = models.DecimalField(max_digits=12, decimal_places=6, validators=[MinValueValidator(0)])
    cache_read_mtok = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True,
                                          validators=[MinValueValidator(0)])
    cache_write_mtok = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True,
                                           validators=[MinValueValidator(0)],
                                           help_text="Cache write (Anthropic's 5-minute TTL); blank: not billed apart.")
    cache_write_1h_mtok = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True,
                                              validators=[MinValueValidator(0)])
    valid_from = models.DateTimeField(help_text="Requests from this moment on are priced with it.")
    note = models.CharField(max_length=200, blank=True, help_text="Where the price comes from (shown as its source).")

    class Meta:
        ordering = ["project", "model", "-valid_from"]
        constraints = [models.UniqueConstraint(fields=["project", "model", "provider", "valid_from"],
                                               name="modelprice_unique")]

    def __str__(self) -> str:
        return f"{self.model} from {self.valid_from:%Y-%m-%d}"


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) in {self.project}"


class Scope(models.TextChoices):
    INGEST = "ingest", "ingest"
    POLICY_READ = "policy:read", "policy:read"
    READ = "read", "read"
    ADMIN = "admin", "admin"


class ApiKey(models.Model):
    """A project's API key. Only a SHA-256 of the secret is stored; see services/api_keys.py."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True, help_text="Visible start of the key.")
    secret_hash = models.CharField(max_length=64, editable=False)
    scopes = models.JSONField(default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes or Scope.ADMIN in self.scopes


class Session(models.Model):
    """One run of an agent, as the agent identified it (client_id)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="sessions")
    client_id = models.CharField(max_length=200)
    agent_name = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # Kept up to date by the workers, so session lists filter and sort without scanning turns.
    turn_count = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0, help_text="Tool calls whose status is not ok.")
    duplicate_tokens = models.PositiveIntegerField(default=0)
    max_window_share = models.FloatField(null=True, blank=True)
    near_window = models.BooleanField(default=False, help_text="A turn used over 80% of the context window.")
    total_tokens = models.PositiveBigIntegerField(
        default=0, db_default=0, help_text="Each request's input (as reported, else estimated) and output, summed.")
    cost_nanos = models.BigIntegerField(null=True, blank=True,
                                        help_text="US dollars x 10^9 of its priced requests; null: none priced.")
    created_at = models.DateTimeField(auto_now_add=True)
    # The day its last turn or call expires (or its own start's, with none): retention deletes the
    # session the day after, when nothing of it is left (services/retention.py). Kept by processing.
    expires_on = models.DateField(null=True, blank=True, editable=False)
    # The day its first turn or call expires (its start's, with none). With expires_on, the day
    # partitions its rows lie in, so queries of them look in those alone (retention.py: days_within).
    # None: not known (a session processing has not seen since this was added).
    first_expires_on = models.DateField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "client_id"], name="session_client_id_unique")
        ]
        indexes = [
            models.Index(fields=["project", "-started_at"], name="session_project_started"),
            models.Index(fields=["project", "agent_name", "-started_at"], name="session_project_agent"),
            models.Index(fields=["project", "expires_on"], name="session_project_expires"),
        ]

    def __str__(self) -> str:
        return self.client_id


class AdvertisedSet(models.Model):
    """A distinct list of tools an agent advertised on a turn, as (name, schema hash) pairs.

    Agents send the same list turn after turn: stored once per project rather than on every turn,
    it keeps turns small and lets workers count its schema tokens once.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    digest = models.CharField(max_length=64)
    # [{"name": ..., "schema_hash": ...}] in the order the agent sent them.
    tools = models.JSONField(default=list)
    tool_count = models.PositiveIntegerField()
    schema_tokens = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "digest"], name="advertisedset_digest_unique")]

    def __str__(self) -> str:
        return f"{self.tool_count} tools ({self.digest[:8]})"


class ToolsFrom(models.TextChoices):
    """Where a turn's advertised tools come from (services/inferred_tools.py)."""

    SENT = "", "sent with the turn"
    AGENT = "agent", "inferred: the agent's last advertised set"
    CATALOG = "catalog", "inferred: the project's catalog"
    UNKNOWN = "unknown", "unknown: nothing to infer them from"


class AgentTools(models.Model):
    """The set of tools each agent (a session's agent name) last advertised, from the turns that
    sent their definitions: what a turn of that agent that did not send them is taken to carry."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    agent_name = models.CharField(max_length=200, blank=True)
    advertised_set = models.ForeignKey(AdvertisedSet, on_delete=models.CASCADE, related_name="+")
    # When the agent was first seen advertising this set (it is updated only when the set changes).
    since = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "agent_name"], name="agenttools_agent_unique")]
        verbose_name_plural = "agent tools"

    def __str__(self) -> str:
        return f"{self.agent_name or '(no agent)'}: {self.advertised_set}"


class Turn(models.Model):
    """One model request inside a session."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    # No database constraint: checking it would probe every day partition for each session deleted.
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns", db_constraint=False)
    client_id = models.CharField(max_length=200)
    index = models.PositiveIntegerField()
    model = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField()
    # False when the source carries no time (a transcript): started_at is then the transcript's
    # start, kept so hourly rollups have a bucket, and pages draw the turn by its order only.
    time_known = models.BooleanField(default=True, db_default=True)
    advertised_set = models.ForeignKey(
        AdvertisedSet, null=True, blank=True, on_delete=models.PROTECT, related_name="turns"
    )
    # Blank when the turn sent its tools; else whence the advertised set was inferred (an
    # OpenTelemetry instrumentation that records no definitions sends none).
    tools_from = models.CharField(max_length=8, choices=ToolsFrom.choices, blank=True, default="", db_default="")
    shadow_tools = models.JSONField(
        null=True, blank=True,
        help_text="toolscope-proxy in shadow mode: the tools the policy would have sent (names); null otherwise.")
    input_tokens = models.PositiveIntegerField(null=True, blank=True, help_text="As the provider reported.")
    output_tokens = models.PositiveIntegerField(null=True, blank=True, help_text="As the provider reported.")
    cached_tokens = models.PositiveIntegerField(null=True, blank=True,
                                                help_text="Input read from the provider's prompt cache, as reported.")
    cache_write_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Input written to the provider's prompt cache, as reported (Anthropic's "
        "cache_creation_input_tokens; OpenAI reports none).")
    cache_write_1h_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Of the cache writes, those with Anthropic's 1-hour TTL (billed 2x input).")
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    system_prompt_chars = models.PositiveIntegerField(null=True, blank=True)
    # The system prompt's identity (SHA-256, first 16 hex digits; blank when only its size came):
    # a prompt that changes between requests breaks the provider's cache (telemetry/services/costs.py).
    system_prompt_hash = models.CharField(max_length=16, blank=True, default="", db_default="")
    task_message = models.TextField(blank=True, help_text="The user message that started the task.")
    # Text of the user/assistant messages new in this turn, kept for the budget (not tool outputs).
    messages = models.JSONField(default=list, blank=True)

    # The budget: this request's context by component, estimated with the project's encoding.
    new_message_tokens = models.PositiveIntegerField(null=True, blank=True, help_text="This turn's new messages.")
    system_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    schema_tokens = models.PositiveIntegerField(null=True, blank=True)
    message_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="User and assistant messages up to and including this turn."
    )
    call_tokens = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Arguments of the tool calls made in earlier turns, carried in this request's history.",
    )
    tool_output_tokens = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Tool outputs carried in the history, after duplicate suppression and compaction.",
    )
    estimated_input_tokens = models.PositiveIntegerField(null=True, blank=True)
    window_share = models.FloatField(null=True, blank=True, help_text="Estimated input / context window.")
    near_window = models.BooleanField(default=False, help_text="Over 80% of the context window.")
    # What the request cost, under the provider's prompt caching (telemetry/services/costs.py), in
    # billionths of a US dollar: integers the hourly rollups add exactly. Null: no price for its model.
    cost_nanos = models.BigIntegerField(null=True, blank=True, help_text="US dollars x 10^9: input and output.")
    schema_cost_nanos = models.BigIntegerField(null=True, blank=True, help_text="Of cost_nanos, the tool schemas.")
    tool_output_cost_nanos = models.BigIntegerField(null=True, blank=True,
                                                    help_text="Of cost_nanos, the tool outputs in the history.")
    cache_break = models.CharField(max_length=32, blank=True, default="", db_default="",
                                   help_text="Why it read less from the cache than the request before left.")
    created_at = models.DateTimeField(auto_now_add=True)
    # The day its time partition is dropped (telemetry/retention.py); set when it is stored.
    expires_on = models.DateField(editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "client_id"], name="turn_client_id_unique"),
        ]
        # A turn is its event id (an OTLP span id). Its index is its place in the conversation,
        # which two requests share when they carry one history (a retry, two branches).
        indexes = [models.Index(fields=["project", "-started_at"], name="turn_project_started"),
                   models.Index(fields=["session", "index"], name="turn_session_index")]
        ordering = ["session_id", "index"]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.index}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Processing inserts in bulk with the day set; this covers rows made one by one (admin, tests).
        expires_set(self, self.started_at)
        super().save(*args, **kwargs)
        session_days_widen(self)


class ToolCallStatus(models.TextChoices):
    OK = "ok", "ok"
    ERROR = "error", "error"
    DENIED = "denied", "denied"
    UNKNOWN_TOOL = "unknown_tool", "unknown tool"
    SCHEMA_ERROR = "schema_error", "schema error"


class Approval(models.TextChoices):
    NOT_REQUIRED = "not_required", "not required"
    APPROVED = "approved", "approved"
    DENIED = "denied", "denied"
    TIMED_OUT = "timed_out", "timed out"


class ToolCall(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="tool_calls", db_constraint=False)
    # No database constraint: Turn is partitioned (its key is (id, expires_on)); the link is the ORM's.
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_calls",
                             db_constraint=False)
    turn_index = models.PositiveIntegerField()
    client_id = models.CharField(max_length=200, help_text="The event id the agent sent.")
    call_id = models.CharField(max_length=200, blank=True, help_text="The provider's tool call id.")
    tool_name = models.CharField(max_length=200)
    # Its turn's model, "" until the turn arrives: the rollups' slice (SLICE_HELP), kept on the row so
    # that a rebuild never joins the (day-partitioned) turns.
    model = models.CharField(max_length=200, blank=True, default="", db_default="", editable=False)
    arguments = models.JSONField(default=dict, blank=True)
    output = models.TextField(blank=True)
    # Set when the policy compacts this output: `output` then holds the compacted text the model
    # would get, and the artifact keeps the original for retrieval.
    artifact = models.OneToOneField(
        "Artifact", null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_call", db_constraint=False
    )
    status = models.CharField(max_length=16, choices=ToolCallStatus.choices, default=ToolCallStatus.OK)
    error = models.TextField(blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    retries = models.PositiveSmallIntegerField(default=0)
    approval = models.CharField(max_length=16, choices=Approval.choices, default=Approval.NOT_REQUIRED)
    started_at = models.DateTimeField()
    time_known = models.BooleanField(default=True, db_default=True, help_text="False: started_at is not when it ran.")
    # What decided `status`: "status field", "is_error flag", "pattern: <name>", or "" (no status
    # sent and no pattern matched). See telemetry/error_patterns.py.
    error_rule = models.CharField(max_length=100, blank=True, default="", db_default="")
    error_text_unflagged = models.BooleanField(
        default=False, db_default=False, help_text="The output reads like an error, but nothing flagged it."
    )
    altered = models.BooleanField(
        default=False,
        db_default=False,  # no rewrite of the table when the column is added
        help_text="Its text held characters the database cannot store (NUL, unpaired surrogates), stored as U+FFFD.",
    )

    # Token accounting, filled by the workers with the project's encoding.
    output_hash = models.CharField(max_length=64, blank=True, help_text="sha256 of the normalised output.")
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    argument_tokens = models.PositiveIntegerField(null=True, blank=True)
    # An output identical (trailing whitespace aside) to an earlier output of the same tool in the
    # same session points at that first occurrence; the agent could have sent `placeholder`.
    duplicate_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="duplicates", db_constraint=False
    )
    duplicate_tokens = models.PositiveIntegerField(default=0, help_text="Tokens this output repeated.")
    placeholder = models.TextField(blank=True)
    placeholder_tokens = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The day its time partition is dropped (telemetry/retention.py); set when it is stored.
    expires_on = models.DateField(editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "client_id"], name="toolcall_client_id_unique")
        ]
        indexes = [
            models.Index(fields=["project", "-started_at"], name="toolcall_project_started"),
            models.Index(fields=["project", "tool_name", "-started_at"], name="toolcall_project_tool"),
            models.Index(fields=["session", "turn_index"], name="toolcall_session_turn"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.client_id})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        expires_set(self, self.started_at)
        super().save(*args, **kwargs)
        session_days_widen(self)


class Artifact(models.Model):
    """The original of a tool output the model received compacted; agents retrieve it by its
    content id, which the compacted text names.

    `content_id` is `toolscope_agent.engine.compaction.artifact_id(original)`, a hash of the text
    alone, so the agent that compacted the output knows it without asking. It is not unique:
    identical originals in one project (or in two) are separate rows with one content id, and a
    lookup is always scoped to a project. The uuid primary key stays the row's identity."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="artifacts")
    content_id = models.CharField(max_length=64, editable=False)
    original = models.TextField()
    compacted = models.TextField()
    tokens_before = models.PositiveIntegerField()
    tokens_after = models.PositiveIntegerField()
    strategy = models.CharField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)
    # Processing gives it its tool call's day.
    # The day its time partition is dropped (telemetry/retention.py); set when it is stored.
    expires_on = models.DateField(editable=False)

    class Meta:
        indexes = [
            models.Index(fields=["project", "-created_at"], name="artifact_project_created"),
            models.Index(fields=["project", "content_id"], name="artifact_project_content"),
        ]

    def __str__(self) -> str:
        return f"{self.strategy} {self.tokens_before}→{self.tokens_after}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Processing inserts in bulk with the id set; this covers rows made one by one (admin, tests).
        if not self.content_id:
            self.content_id = artifact_id(self.original)
        expires_set(self, self.created_at)
        super().save(*args, **kwargs)


# A rollup row's slice: the agent (its session's `agent_name`) and the model (its turn's; a call's is
# its turn's, "" until the turn arrives; a session's its own `model`) it sums over, so the overview
# can be filtered by either. Unfiltered figures add up the slices.
SLICE_HELP = {"agent_name": "The sessions' agent_name.", "model": "The turns' model."}
SLICE = tuple(SLICE_HELP)


class ToolHourly(models.Model):
    """Per project, tool, hour and slice (agent, model): what the dashboard's tool charts read.
    Processing adds each batch's changes as it commits, late data to its own hour; a rebuild
    recomputes an hour from raw rows (services/rollups.py)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    tool_name = models.CharField(max_length=200)
    agent_name = models.CharField(max_length=200, blank=True, default="", db_default="",
                                  help_text=SLICE_HELP["agent_name"])
    model = models.CharField(max_length=200, blank=True, default="", db_default="", help_text=SLICE_HELP["model"])
    calls = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0, help_text="Calls whose status is not ok.")
    unflagged_errors = models.PositiveIntegerField(
        default=0, db_default=0,
        help_text="Calls whose output reads like an error that nothing flagged (status kept as reported).",
    )
    # The hour's call durations as DDSketch bins ({"<bucket>": count}: telemetry/sketches.py),
    # and the hour's p50 and p95 read from them when they change.
    duration_bins = models.JSONField(default=dict, db_default={}, blank=True)
    duration_p50_ms = models.FloatField(null=True)
    duration_p95_ms = models.FloatField(null=True)
    output_tokens = models.PositiveBigIntegerField(default=0)
    duplicates = models.PositiveIntegerField(default=0)
    duplicate_tokens = models.PositiveBigIntegerField(default=0)
    compactions = models.PositiveIntegerField(default=0)
    compaction_savings = models.PositiveBigIntegerField(default=0, help_text="Tokens before minus after.")
    times_advertised = models.PositiveIntegerField(default=0, help_text="Turns that advertised the tool.")
    times_called = models.PositiveIntegerField(default=0, help_text="Turns that called the tool.")
    schema_tokens = models.PositiveBigIntegerField(default=0, help_text="Its schema's tokens, summed over turns.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "hour", "tool_name", "agent_name", "model"],
                                    name="toolhourly_unique")
        ]
        indexes = [models.Index(fields=["project", "tool_name", "hour"], name="toolhourly_tool")]

    def __str__(self) -> str:
        return f"{self.tool_name} @ {self.hour:%Y-%m-%d %H:00}"


class ToolDaily(models.Model):
    """Per project, tool and UTC day: the sum of the day's hourly duration bins, so that a month's
    percentiles add up 30 sketches per tool rather than 720 (telemetry/selectors.py). Processing
    adds to it with the hours; a rebuild recomputes the days of the hours it rebuilt."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    tool_name = models.CharField(max_length=200)
    duration_bins = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "day", "tool_name"], name="tooldaily_unique")]

    def __str__(self) -> str:
        return f"{self.tool_name} @ {self.day}"


class ProjectHourly(models.Model):
    """Per project, hour and slice (agent, model): sessions, turns and tokens by component for the
    overview."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    agent_name = models.CharField(max_length=200, blank=True, default="", db_default="",
                                  help_text=SLICE_HELP["agent_name"])
    model = models.CharField(max_length=200, blank=True, default="", db_default="", help_text=SLICE_HELP["model"])
    sessions = models.PositiveIntegerField(default=0, help_text="Sessions started in the hour.")
    turns = models.PositiveIntegerField(default=0)
    tool_calls = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    near_window_turns = models.PositiveIntegerField(default=0)
    system_prompt_tokens = models.PositiveBigIntegerField(default=0)
    schema_tokens = models.PositiveBigIntegerField(default=0)
    message_tokens = models.PositiveBigIntegerField(default=0)
    tool_output_tokens = models.PositiveBigIntegerField(default=0)
    estimated_input_tokens = models.PositiveBigIntegerField(default=0)
    provider_input_tokens = models.PositiveBigIntegerField(default=0)
    provider_output_tokens = models.PositiveBigIntegerField(default=0)
    call_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    # Over the turns whose provider reported input tokens only: what the headline shares divide.
    reported_turns = models.PositiveIntegerField(default=0, db_default=0)
    reported_schema_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    reported_estimated_tokens = models.PositiveBigIntegerField(default=0, db_default=0)
    # Dollars (x 10^9) over the turns with a price (`priced_turns`), and requests that lost the cache.
    priced_turns = models.PositiveIntegerField(default=0, db_default=0)
    cost_nanos = models.PositiveBigIntegerField(default=0, db_default=0)
    schema_cost_nanos = models.PositiveBigIntegerField(default=0, db_default=0)
    tool_output_cost_nanos = models.PositiveBigIntegerField(default=0, db_default=0)
    cache_breaks = models.PositiveIntegerField(default=0, db_default=0)
    duplicate_tokens = models.PositiveBigIntegerField(default=0)
    compaction_savings = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "hour", "agent_name", "model"],
                                               name="projecthourly_unique")]

    def __str__(self) -> str:
        return f"{self.project_id} @ {self.hour:%Y-%m-%d %H:00}"


class DirtyHour(models.Model):
    """An hour of a project to rebuild from its raw rows (an operator's or a repair's request; the
    rollup task claims it). One row per (project, hour) however many times it was marked."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    hour = models.DateTimeField()
    marked_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "hour"], name="dirtyhour_unique")]

    def __str__(self) -> str:
        return f"{self.project_id} @ {self.hour:%Y-%m-%d %H:00}"


class BatchStatus(models.TextChoices):
    PENDING = "pending", "pending"
    PROCESSING = "processing", "processing"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class BatchKind(models.TextChoices):
    EVENTS = "events", "events"
    TRANSCRIPT = "transcript", "transcript"
    OTLP = "otlp", "otlp"


class IngestBatch(models.Model):
    """An accepted request body, stored (already redacted) before the API answers 202."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="batches")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=16, choices=BatchKind.choices, default=BatchKind.EVENTS)
    payload = JSONTextField(help_text="The accepted events, redacted: {\"events\": [...]}.")
    event_count = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=BatchStatus.choices, default=BatchStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The day its time partition is dropped (telemetry/retention.py); set when it is stored.
    expires_on = models.DateField(editable=False)

    class Meta:
        verbose_name_plural = "ingest batches"
        indexes = [
            models.Index(fields=["project", "-received_at"], name="batch_project_received"),
            # The sweeper's question: what is still pending or processing, oldest first.
            models.Index(
                fields=["status", "received_at"],
                name="batch_open",
                condition=models.Q(status__in=["pending", "processing"]),
            ),
        ]

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        expires_set(self, self.received_at)
        super().save(*args, **kwargs)


class QuarantinedEvent(models.Model):
    """An accepted event the workers could not store, kept whole with the reason, so that its
    batch's other events commit and nothing accepted is lost. An operator retries it from the
    admin once the cause is fixed (services/quarantine.py)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    batch = models.ForeignKey(IngestBatch, null=True, blank=True, on_delete=models.SET_NULL, related_name="quarantined",
                              db_constraint=False)
    event_type = models.CharField(max_length=16)
    client_id = models.CharField(max_length=200, help_text="The event id the agent sent.")
    event = JSONTextField(help_text="The event as accepted (redacted).")
    reason = models.TextField(help_text="Why it could not be stored; never the values it held.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["project", "-created_at"], name="quarantine_project_created")]

    def __str__(self) -> str:
        return f"{self.event_type} {self.client_id}"


def session_days_widen(row: Turn | ToolCall) -> None:
    """Keep a turn or call saved one by one within its session's days (Session.first_expires_on,
    expires_on); processing keeps them for the rows it inserts in bulk."""
    day = models.Value(row.expires_on)
    Session.objects.filter(pk=row.session_id, expires_on__lt=row.expires_on).update(expires_on=day)
    Session.objects.filter(pk=row.session_id, first_expires_on__gt=row.expires_on).update(first_expires_on=day)


def expires_set(row: Turn | ToolCall | Artifact | IngestBatch, moment: Any) -> None:
    """Give a row saved one by one the day it expires, from its project's retention."""
    if row.expires_on is None:
        row.expires_on = expiry_day(retention_days=row.project.retention_days, moment=moment)
