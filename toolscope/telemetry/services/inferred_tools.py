"""The tools of a turn that did not say which it carried, inferred from what the project knows.

The openai-v2 OpenTelemetry instrumentation records no tool definitions (docs/otlp.md): its turns
arrive with `tools_known: false`, and counting them as carrying no tools would leave the schema,
the headline number, at 0 and the budget unattributed. Such a turn is taken to carry, in order:

1. the set its agent (the session's agent name) last advertised on a turn that sent its
   definitions (`AgentTools`, kept by every batch that has such turns), else
2. the project's catalog (the tools the agent registered, or any agent of the project
   advertised): one definition per name, the most recently seen,

and is marked with where its set came from (`Turn.tools_from`), so every page that shows it can
say so; with neither it carries none and is marked `unknown`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from django.db import connection

from toolscope.policies.models import Tool
from toolscope.telemetry.models import AdvertisedSet, AgentTools, Project, ToolsFrom
from toolscope.telemetry.services.advertised import advertised_sets_resolve


class Advertised(NamedTuple):
    agent: str
    advertised_set_id: int
    at: datetime


class Inferred(NamedTuple):
    advertised_set_id: int | None
    tools_from: str


def agent_tools_record(*, project: Project, advertised: Sequence[Advertised]) -> None:
    """Keep, per agent, the set of its latest turn among `advertised` (turns that sent their
    definitions): one statement, which changes a row only when the agent's set changed."""
    latest: dict[str, Advertised] = {}
    for seen in advertised:
        if seen.agent not in latest or seen.at >= latest[seen.agent].at:
            latest[seen.agent] = seen
    if not latest:
        return
    table = connection.ops.quote_name(AgentTools._meta.db_table)
    rows = sorted(latest.values())  # one order for every batch: concurrent upserts do not deadlock
    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (project_id, agent_name, advertised_set_id, since) VALUES {values} "  # noqa: S608
            f"ON CONFLICT (project_id, agent_name) DO UPDATE SET advertised_set_id = excluded.advertised_set_id, "
            f"since = excluded.since WHERE {table}.advertised_set_id <> excluded.advertised_set_id",
            [value for row in rows for value in (project.pk, row.agent, row.advertised_set_id, row.at)],
        )


def tools_infer(*, project: Project, agents: set[str]) -> dict[str, Inferred]:
    """What a turn of each of `agents` that did not send its tools is taken to carry."""
    known = AgentTools.objects.filter(project=project, agent_name__in=agents)
    inferred = {agent: Inferred(set_id, ToolsFrom.AGENT)
                for agent, set_id in known.values_list("agent_name", "advertised_set_id")}
    if missing := agents - inferred.keys():
        catalog = catalog_set(project=project)
        for agent in missing:
            inferred[agent] = Inferred(catalog.pk, ToolsFrom.CATALOG) if catalog else Inferred(None, ToolsFrom.UNKNOWN)
    return inferred


def catalog_set(*, project: Project) -> AdvertisedSet | None:
    """The project's catalog as an advertised set (None when it is empty): one definition per
    name, the most recently seen one's, in name order."""
    entries: dict[str, dict[str, str]] = {}
    for name, digest in (Tool.objects.filter(project=project).exclude(schema_hash="")
                         .order_by("name", "-last_seen_at", "-pk").values_list("name", "schema_hash")):
        entries.setdefault(name, {"name": name, "schema_hash": digest})
    (advertised,) = advertised_sets_resolve(project=project, lists=[list(entries.values())])
    return advertised
