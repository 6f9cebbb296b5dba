"""The policy pages: the draft with its catalog, published versions and labels, the audit trail,
and what the draft would send for a message."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count
from toolscope_agent.engine.render import selection_cost
from toolscope_agent.engine.schemas import schema_hash
from toolscope_agent.engine.selection import SessionState, search_tool_added, select_tools
from toolscope_agent.engine.tokens import tool_tokens

from toolscope.policies.models import (
    Policy,
    PolicyAuditEntry,
    PolicyLabel,
    PolicyVersion,
    Simulation,
    Tool,
    ToolVersion,
)
from toolscope.policies.selectors import Definition, policy_label_version, tool_catalog
from toolscope.policies.services.diff import document_diff
from toolscope.policies.services.documents import policy_document_build
from toolscope.policies.services.publish import version_repeated
from toolscope.policies.services.simulation_runs import simulation_latest
from toolscope.telemetry.models import AgentTools, Project
from toolscope.tokenizer import counter, schema_tokens

VERSIONS_SHOWN = 50
AUDIT_SHOWN = 15
# What an agent applies when a project has no draft at all: every tool (docs/policy.md).
NO_POLICY: dict[str, Any] = {"selection": {"mode": "all", "allowed": None}}
# The dashboard prices selections in OpenAI's rendering, as Tool.schema_tokens is counted.
FLAVOR = "openai"


def policy_draft_get(*, project_id: int) -> Policy | None:
    """The draft with its tool sets, ready for the draft form and policy_validate: three queries."""
    return (
        Policy.objects.filter(project_id=project_id).select_related("updated_by")
        .prefetch_related("allowed", "always_on").first()
    )


def policy_get(*, project_id: int) -> Policy | None:
    """The draft row alone, for pages that build its document anyway: one query."""
    return Policy.objects.filter(project_id=project_id).first()


def policy_catalog(*, project_id: int) -> list[Tool]:
    """The catalog in name order, one row per name (its first-registered definition: the policy
    refers to tools by name, and a name's other sources follow it), only what the pickers show:
    one query."""
    rows = Tool.objects.filter(project_id=project_id).only("id", "name", "description", "schema_tokens")
    first: dict[str, Tool] = {}
    for tool in rows.order_by("name", "pk"):
        first.setdefault(tool.name, tool)
    return list(first.values())


@dataclass(frozen=True)
class LabelRow:
    name: str
    number: int
    updated_at: Any
    updated_by: str


@dataclass
class VersionRow:
    number: int
    published_at: Any
    published_by: str
    comment: str
    etag: str
    labels: list[str] = field(default_factory=list)


def policy_labels(*, project_id: int) -> list[LabelRow]:
    """The project's labels and the version each points at: one query, no document."""
    rows = (PolicyLabel.objects.filter(project_id=project_id).order_by("name")
            .values_list("name", "version__number", "updated_at", "updated_by__username"))
    return [LabelRow(name, number, updated_at, by or "") for name, number, updated_at, by in rows]


def policy_versions(*, project_id: int, labels: list[LabelRow], limit: int = VERSIONS_SHOWN) -> list[VersionRow]:
    """The newest `limit` versions, newest first, each with the labels pointing at it: one query
    (the labels come from policy_labels)."""
    by_number: dict[int, list[str]] = defaultdict(list)
    for label in labels:
        by_number[label.number].append(label.name)
    rows = (PolicyVersion.objects.filter(project_id=project_id).order_by("-number")
            .values_list("number", "published_at", "published_by__username", "comment", "etag")[:limit])
    return [VersionRow(number, at, by or "", comment, etag, by_number.get(number, []))
            for number, at, by, comment, etag in rows]


def policy_version_documents(*, project_id: int, numbers: list[int]) -> dict[int, dict[str, Any]]:
    """The documents of versions `numbers` of the project, by number: one query."""
    rows = PolicyVersion.objects.filter(project_id=project_id, number__in=numbers).values_list("number", "document")
    return dict(rows)


def policy_version_get(*, project_id: int, number: int) -> PolicyVersion | None:
    return PolicyVersion.objects.filter(project_id=project_id, number=number).first()


def policy_audit_recent(*, project_id: int, limit: int = AUDIT_SHOWN) -> list[PolicyAuditEntry]:
    """The latest policy changes with who made them: one query."""
    return list(PolicyAuditEntry.objects.filter(project_id=project_id).select_related("user")
                .defer("detail").order_by("-created_at", "-id")[:limit])


@dataclass(frozen=True)
class PublishPreview:
    """What publishing the draft under a label would change, and the latest simulations of the
    draft and of the version the label serves (None when not simulated yet)."""

    current: int | None
    changes: list[str] | None
    draft_simulation: Simulation | None
    current_simulation: Simulation | None
    # A version whose content the draft repeats (the label's, else the newest): publishing would
    # only add a copy of it, so the page offers to point the label at it instead.
    identical: int | None = None


def publish_preview(*, project: Project, policy: Policy, label: str) -> PublishPreview:
    """The draft document's queries, plus one for the label, one for the newest version and one
    per simulation looked up."""
    draft = policy_document_build(policy=policy)
    current = policy_label_version(project_id=project.pk, name=label)
    identical = version_repeated(project_id=project.pk, document=draft, current=current)
    return PublishPreview(
        current=current.number if current else None,
        changes=document_diff(old=current.document, new=draft) if current else None,
        draft_simulation=simulation_latest(project=project, document=draft),
        current_simulation=simulation_latest(project=project, document=current.document) if current else None,
        identical=identical,
    )


@dataclass(frozen=True)
class SentTool:
    name: str
    reason: str
    tokens: int


@dataclass(frozen=True)
class CatalogView:
    """The definitions a policy page counts, one per name, and whose they are: with an agent
    chosen, those of the set it last advertised, the rest (and with none chosen, all) the most
    recently seen definition of each name, as /policy/resolve picks them (docs/policy.md,
    "Catalog identity"). The draft page and the Test page count the same ones."""

    definitions: dict[str, Definition]
    tokens: dict[str, int]
    agent: str  # "" when none is chosen
    agents: list[str]  # the agents whose advertised set is known
    from_agent: int  # names whose definition is the agent's
    several: list[str]  # names that had more than one definition (agents' differ, or one changed)

    @property
    def whose(self) -> str:
        if self.agent:
            tools = f"{self.from_agent} tool{'s' if self.from_agent != 1 else ''}"
            return f"{self.agent}'s last advertised set for {tools}; the most recently seen definition of any other"
        return "the most recently seen definition of each tool (any agent's)"


def catalog_view(*, project: Project, agent: str = "") -> CatalogView:
    """Three or four queries: the agents, the names with several definitions, the catalog, and the
    chosen agent's set."""
    agents: dict[str, list[Definition]] = dict(AgentTools.objects.filter(project=project).order_by("agent_name")
                                               .values_list("agent_name", "advertised_set__tools"))
    definitions = {definition["name"]: definition for definition in tool_catalog(project=project)}
    from_agent = 0
    if agent in agents:
        own = tool_catalog(project=project, advertised=agents[agent])
        definitions.update((definition["name"], definition) for definition in own)
        from_agent = len(own)
    several = list(ToolVersion.objects.filter(tool__project=project).values("tool__name")
                   .annotate(definitions=Count("schema_hash", distinct=True)).filter(definitions__gt=1)
                   .order_by("tool__name").values_list("tool__name", flat=True))
    return CatalogView(definitions=definitions, tokens=_tokens(definitions.values(), project.encoding),
                       agent=agent if agent in agents else "", agents=list(agents), from_agent=from_agent,
                       several=several)


def _tokens(definitions: Any, encoding: str) -> dict[str, int]:
    """Each definition's schema tokens as Tool.schema_tokens counts them (memoised by hash)."""
    out = {}
    for definition in definitions:
        description, schema = definition.get("description") or "", definition.get("input_schema") or {}
        digest = definition.get("schema_hash") or schema_hash(definition["name"], description, schema)
        out[definition["name"]] = schema_tokens(name=definition["name"], description=description, input_schema=schema,
                                                schema_hash=digest, encoding=encoding, flavor=FLAVOR)
    return out


@dataclass(frozen=True)
class MessageTest:
    """What the draft sends for one message on the first turn of a session."""

    message: str
    mode: str
    tools: list[SentTool]
    deferred: list[str]
    menu: str | None
    tokens: int
    all_tokens: int
    catalog: CatalogView

    @property
    def allowed_count(self) -> int:
        return len(self.tools) + len(self.deferred)

    @property
    def saved(self) -> int:
        return self.all_tokens - self.tokens

    @property
    def saved_share(self) -> float | None:
        return self.saved / self.all_tokens if self.all_tokens else None


def draft_message_test(*, project: Project, policy: Policy | None, message: str,
                       catalog: CatalogView | None = None) -> MessageTest:
    """select_tools on the project's catalog under the draft, with an empty session state, priced
    against sending every allowed tool: the draft document's queries plus catalog_view's. A
    draft that searches gets toolscope's `tool_search` when the catalog has none, as
    /policy/resolve and the SDK send it. Each tool counts as on the draft page (`catalog`)."""
    document = policy_document_build(policy=policy) if policy is not None else NO_POLICY
    catalog = catalog or catalog_view(project=project)
    definitions = list(catalog.definitions.values())
    selection = select_tools(search_tool_added(definitions, document), document, SessionState(), message)
    allowed = document["selection"].get("allowed")
    everything = select_tools(definitions, {"selection": {"mode": "all", "allowed": allowed}}, SessionState(), "")
    count = counter(project.encoding)
    tools = [
        SentTool(tool["name"], selection.reasons[tool["name"]],
                 catalog.tokens.get(tool["name"]) or tool_tokens(
                     tool["name"], tool.get("description") or "", tool.get("input_schema") or {}, count, FLAVOR))
        for tool in selection.tools
    ]
    return MessageTest(
        message=message, mode=selection.mode, tools=tools, deferred=[tool["name"] for tool in selection.deferred],
        menu=selection.menu, tokens=selection_cost(selection, count, FLAVOR),
        all_tokens=selection_cost(everything, count, FLAVOR), catalog=catalog,
    )
