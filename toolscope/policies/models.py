"""A project's tool catalog and the policy that decides which tools an agent sends."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from toolscope_agent.engine.search import DEFAULT_RANKER, RANKERS

from toolscope.telemetry.models import Project


def semantic_by_default() -> bool:
    """New policies rank tool_search by meaning too wherever the server has the model
    (TOOL_SEARCH_MODEL, the bundled one unless turned off)."""
    return bool(settings.TOOL_SEARCH_MODEL)


class ToolScope(models.TextChoices):
    READ_ONLY = "read_only", "read only"
    WRITE = "write", "write"


class OnSchemaError(models.TextChoices):
    RETURN_ERROR = "return_error", "return the error to the model"
    RAISE = "raise", "raise in the agent"
    COERCE = "coerce", "coerce arguments"


class Tool(models.Model):
    """One source's definition of a tool in a project's catalog, with its current schema and the
    per-tool settings.

    A tool is identified by its source (an MCP server, an agent; "" is a source too) and its name:
    two sources' tools of one name are two rows, and a changed schema is a new ToolVersion of its
    own source's row. Policies refer to tools by name, so the rows of one name share the policy's
    sets and the per-tool settings (services.catalog keeps them alike; docs/policy.md, "Catalog
    identity").
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=200, blank=True, help_text="e.g. local, or an MCP server's name.")
    schema_hash = models.CharField(max_length=64, blank=True, db_index=True)
    schema_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tokens of the definition as sent in a provider's tools array."
    )
    first_seen_at = models.DateTimeField(auto_now_add=True)
    # Set when an agent registers or advertises the tool, never by editing its settings.
    last_seen_at = models.DateTimeField(default=timezone.now)

    # Per-tool settings, served to agents in the policy's "tools" section.
    scope = models.CharField(max_length=16, choices=ToolScope.choices, default=ToolScope.READ_ONLY)
    requires_approval = models.BooleanField(default=False)
    redact = models.JSONField(default=list, blank=True, help_text="Argument names replaced by [REDACTED].")
    max_result_tokens = models.PositiveIntegerField(null=True, blank=True)
    on_schema_error = models.CharField(
        max_length=16, choices=OnSchemaError.choices, default=OnSchemaError.RETURN_ERROR
    )
    # {"max_attempts": 3, "backoff_seconds": 1.0, "on": ["timeout"]}
    retry_policy = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["name", "source"]
        constraints = [
            # Name before source: the catalog is read by (project, name), which this index serves.
            models.UniqueConstraint(fields=["project", "name", "source"], name="tool_project_name_source_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.source})" if self.source else self.name


class ToolVersion(models.Model):
    """Every schema a tool has had; a new schema hash adds a row, history is never rewritten."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="versions")
    schema_hash = models.CharField(max_length=64)
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict)
    schema_tokens = models.PositiveIntegerField(null=True, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tool", "-first_seen_at"]
        constraints = [
            models.UniqueConstraint(fields=["tool", "schema_hash"], name="toolversion_hash_unique")
        ]

    def __str__(self) -> str:
        return f"{self.tool.name}@{self.schema_hash[:8]}"


class SelectionMode(models.TextChoices):
    ALL = "all", "all: send every allowed tool"
    CONTEXT_RULES = "context_rules", "context rules: always-on set + groups matched on the task"
    PROGRESSIVE = "progressive", "progressive: menu of every tool, schemas of activated ones"
    TOOL_SEARCH = "tool_search", "tool search: tiny always-on set + a tool_search meta-tool"


class ToolList(models.TextChoices):
    PER_REQUEST = "per_request", "per request: each request's list chosen anew"
    APPEND_ONLY = "append_only", "append only: a tool once sent stays for the session"
    FIXED = "fixed", "fixed: the first request's list, grown only by searches and calls"


class Policy(models.Model):
    """The draft policy of a project. Publishing freezes it into a PolicyVersion."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="policy")
    mode = models.CharField(max_length=16, choices=SelectionMode.choices, default=SelectionMode.ALL)
    allowed = models.ManyToManyField(
        Tool, blank=True, related_name="allowed_in",
        help_text="The only tools an agent may be sent. Empty: every catalog tool.",
    )
    always_on = models.ManyToManyField(Tool, blank=True, related_name="always_on_in")
    sticky_discovered = models.BooleanField(
        default=True, help_text="Tools discovered earlier in a session stay loaded."
    )
    hint_prefix = models.CharField(max_length=4, default="$", help_text="Progressive mode's activation hint.")
    tool_list = models.CharField(
        max_length=16, choices=ToolList.choices, default=ToolList.PER_REQUEST, db_default=ToolList.PER_REQUEST,
        help_text="How a session's tool list may change between requests: the list heads the provider's prompt "
        "cache, so a list that changes re-writes the conversation after it at the cache-write price.",
    )
    search_always_on = models.BooleanField(
        default=False, help_text="Send tool_search (the catalog's, else toolscope's) on every turn, in every mode: "
        "context rules with a search to fall back on.",
    )
    rule_window = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(2)],
        help_text="Task messages context rules read: 1, the request's task; 2, the instruction before it too.",
    )
    search_top_k = models.PositiveSmallIntegerField(
        default=8, validators=[MinValueValidator(1), MaxValueValidator(20)]
    )
    search_max_top_k = models.PositiveSmallIntegerField(
        default=20, validators=[MinValueValidator(1), MaxValueValidator(20)]
    )
    provider_search = models.BooleanField(
        default=False, help_text="Ask the provider's own tool search (Anthropic defer_loading)."
    )
    search_defer_loading = models.BooleanField(
        default=False,
        help_text="Defer loading with toolscope's search: the tools not sent are deferred (Anthropic "
                  "defer_loading, the Responses API's deferred tools) and tool_search's answers load them into "
                  "the conversation, so the list at the head of the prompt stays cached. The provider's own "
                  "search, when on, wins.",
    )
    search_ranker = models.CharField(
        max_length=16, choices=[(version, version) for version in sorted(RANKERS)], default=DEFAULT_RANKER,
        help_text="tool_search's ranking. A published version keeps the ranker it was published with.",
    )
    search_semantic = models.BooleanField(
        default=semantic_by_default,
        help_text="tool_search also ranks by meaning: the server's sentence-embedding model (TOOL_SEARCH_MODEL) "
                  "fused with the lexical ranking; agents then ask the server to search.",
    )
    search_learned = models.BooleanField(
        default=True,
        help_text="tool_search also matches what this project's agents asked before calling each tool "
                  "(task messages and earlier searches, refreshed hourly and served with the policy).",
    )
    suppress_duplicates = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name_plural = "policies"

    def __str__(self) -> str:
        return f"{self.project} draft policy"


class ToolGroup(models.Model):
    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="groups")
    name = models.SlugField(max_length=64)
    description = models.CharField(max_length=200, blank=True)
    tools = models.ManyToManyField(Tool, blank=True, related_name="groups")

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["policy", "name"], name="toolgroup_name_unique")]

    def __str__(self) -> str:
        return self.name


class ContextRule(models.Model):
    """Ordered: keywords (whole words) and/or a regex on the task message, or a call of one of
    `after_tools` earlier in the session, select groups."""

    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="context_rules")
    position = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=100)
    keywords = models.JSONField(default=list, blank=True)
    regex = models.CharField(max_length=200, blank=True)
    after_tools = models.JSONField(default=list, blank=True,
                                   help_text="Tool names: the rule also matches once the session has called one.")
    groups = models.ManyToManyField(ToolGroup, blank=True, related_name="context_rules")
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["policy", "position", "id"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if not self.keywords and not self.regex and not self.after_tools:
            raise ValidationError("A context rule needs keywords, a regex or tools called before.")


class CompactionStrategy(models.TextChoices):
    HEAD_TAIL = "head_tail", "head + tail"
    HEAD = "head", "head"
    TAIL = "tail", "tail"
    JSON_PRUNE = "json_prune", "JSON prune (keep structure)"
    DEDUPE_LINES = "dedupe_lines", "dedupe repeated lines"


class CompactionRule(models.Model):
    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="compaction_rules")
    position = models.PositiveIntegerField(default=0)
    tools = models.CharField(max_length=200, help_text="Tool name glob, e.g. bash* or mcp_github_*.")
    max_tokens = models.PositiveIntegerField(validators=[MinValueValidator(16)])
    strategy = models.CharField(
        max_length=16, choices=CompactionStrategy.choices, default=CompactionStrategy.HEAD_TAIL
    )

    class Meta:
        ordering = ["policy", "position", "id"]

    def __str__(self) -> str:
        return f"{self.tools} → {self.max_tokens} ({self.strategy})"


class PolicyVersion(models.Model):
    """A published policy, frozen: its document is what agents receive and never changes."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="policy_versions")
    number = models.PositiveIntegerField()
    document = models.JSONField()
    etag = models.CharField(max_length=64)
    comment = models.CharField(max_length=500, blank=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Not auto_now_add: publishing writes the same instant into the document before saving.
    published_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["project", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["project", "number"], name="policyversion_number_unique")
        ]

    def __str__(self) -> str:
        return f"{self.project} v{self.number}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None and not kwargs.get("force_insert"):
            raise ValidationError("A published policy version is immutable; publish a new one.")
        super().save(*args, **kwargs)


class PolicyLabel(models.Model):
    """A name (production, staging, ...) pointing at a version; moving it back is a rollback."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="policy_labels")
    name = models.SlugField(max_length=64)
    version = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="labels")
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["project", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="policylabel_name_unique")]

    def __str__(self) -> str:
        return f"{self.project}:{self.name} → v{self.version.number}"

    def clean(self) -> None:
        if self.version_id and self.version.project_id != self.project_id:
            raise ValidationError({"version": "The version belongs to another project."})


class PolicyAuditAction(models.TextChoices):
    DRAFT_CHANGED = "draft_changed", "draft changed"
    PUBLISHED = "published", "published"
    LABEL_MOVED = "label_moved", "label moved"
    ROLLBACK = "rollback", "rollback"


class PolicyAuditEntry(models.Model):
    """Who changed a project's policy, how, and when: drafts, publishes and label moves."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="policy_audit_entries")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=16, choices=PolicyAuditAction.choices)
    summary = models.TextField()
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at"], name="policyaudit_project_created")]
        verbose_name_plural = "policy audit entries"

    def __str__(self) -> str:
        return f"{self.project} {self.action}: {self.summary[:80]}"


class ToolEmbedding(models.Model):
    """A tool text's embedding by one semantic model, computed once (by a worker, or by the first
    search that needed it) and read by every search after (services/embeddings.py).

    Content-addressed: keyed by the model's identity and the SHA-256 of the text embedded
    (toolscope_agent.semantic.tool_text: the name's words, description and parameter names), so
    one definition is embedded once whatever the number of projects, sources or versions holding
    it. It stores no text and no project: a vector is only ever looked up from a text the asking
    project holds, and says nothing to anyone else.
    """

    model = models.CharField(max_length=120, help_text="`<directory>@<12 hex of its weights' SHA-256>`")
    text_sha256 = models.CharField(max_length=64)
    vector = models.BinaryField(help_text="Unit vector, little-endian float32.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["model", "text_sha256"], name="toolembedding_key_unique")]

    def __str__(self) -> str:
        return f"{self.model}:{self.text_sha256[:12]}"


class SearchHistory(models.Model):
    """What a project's recorded sessions asked before calling each tool (engine/history.py),
    refreshed by a worker and served beside policies whose `tool_search.learned` is on."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="search_history")
    tools = models.JSONField(default=dict, help_text="{tool name: [texts]}, bounded.")
    revision = models.CharField(max_length=16, help_text="A hash of `tools`: part of the served ETag.")
    sessions = models.PositiveIntegerField(default=0, help_text="Sessions it was learned from.")
    refreshed_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "search histories"

    def __str__(self) -> str:
        return f"{self.project} search history"


class SimulationStatus(models.TextChoices):
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


class BackgroundRun(models.Model):
    """Work a worker does for a page, with its status, progress and stored result: started once
    per key (asking again reopens the row, done or running), claimed pending -> running by one
    worker, read back by the page that polls it."""

    key = models.CharField(max_length=64, help_text="SHA-256 of what the run was asked for.")
    status = models.CharField(max_length=16, choices=SimulationStatus.choices, default=SimulationStatus.PENDING)
    result = models.JSONField(null=True, blank=True)
    headline = models.JSONField(null=True, blank=True,
                                help_text="A done run's summary for the Runs page (sessions, savings, misses).")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    # The subclass's (done, total) count fields: sessions replayed, candidates scored.
    progress_fields: tuple[str, str] = ("", "")

    @property
    def done_total(self) -> tuple[int, int]:
        done, total = self.progress_fields
        return getattr(self, done), getattr(self, total)

    @property
    def progress(self) -> float:
        done, total = self.done_total
        return done / total if total else float(self.status == SimulationStatus.DONE)

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the pace so far; None before the first step or after the end."""
        if self.status != SimulationStatus.RUNNING or not self.started_at or not 0 < self.progress < 1:
            return None
        elapsed = (timezone.now() - self.started_at).total_seconds()
        return round(elapsed / self.progress * (1 - self.progress), 1)


class Simulation(BackgroundRun):
    """A policy document replayed on a selection of recorded sessions (services/simulation_runs.py).

    Keyed by (document hash, selection): asking again for the same pair reopens this row, done
    or running, instead of replaying again.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="simulations")
    document = models.JSONField()
    document_hash = models.CharField(max_length=64, db_index=True, help_text="SHA-256 of the document alone.")
    source = models.CharField(max_length=100, help_text='What was replayed: "draft", "v3", "uploaded".')
    selection = models.JSONField(help_text="start, end, agent_name, model, limit.")
    sessions_total = models.PositiveIntegerField(default=0)
    sessions_done = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "key"], name="simulation_key_unique")]

    def __str__(self) -> str:
        return f"{self.project} simulation of {self.source} ({self.status})"

    progress_fields = ("sessions_done", "sessions_total")


class SimulationTurns(models.Model):
    """Every replayed turn's figures of a simulation (the first MAX_TURN_ROWS), apart from its
    result so that pages reading the result never load them; the per-turn CSV does."""

    simulation = models.OneToOneField(Simulation, on_delete=models.CASCADE, primary_key=True, related_name="turns")
    sessions = models.JSONField(help_text="Session client ids; a row names its session by index.")
    rows = models.JSONField(help_text="[session index, turn, calls, misses, advertised tokens, sent tokens, "
                                      "tools sent] per turn, in replay order.")

    class Meta:
        verbose_name_plural = "simulation turns"

    def __str__(self) -> str:
        return f"turns of {self.simulation}"


class Recommendation(BackgroundRun):
    """Candidate policies learnt from a project's recorded sessions and scored on newer ones
    (services/recommendations.py). Keyed by (days, limit, newest session), or for a time range
    (the API's) by (start, end, agent, model, limit, newest session): new sessions make a new
    one; asking again before reopens this one."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="recommendations")
    days = models.PositiveSmallIntegerField(help_text="The last days learnt from; 0 for a time range.")
    limit = models.PositiveIntegerField()
    start = models.DateTimeField(null=True, blank=True, help_text="A time range's start (with end), else days.")
    end = models.DateTimeField(null=True, blank=True)
    agent_name = models.CharField(max_length=200, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    candidates_total = models.PositiveIntegerField(default=0)
    candidates_done = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "key"], name="recommendation_key_unique")]

    def __str__(self) -> str:
        window = f"{self.start:%Y-%m-%d %H:%M}..{self.end:%Y-%m-%d %H:%M}" if self.start else f"{self.days} days"
        return f"{self.project} recommendations from {window} ({self.status})"

    progress_fields = ("candidates_done", "candidates_total")
