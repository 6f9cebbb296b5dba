"""Token accounting of a session: duplicates, compaction artifacts and each turn's budget.

Recomputed for every session a batch touches, from the rows as they are now, so events that
arrive late or out of order still give the same answer as if they had come in order, and
processing a batch twice changes nothing. Texts are tokenised once, when their rows are created
(see processing.py); this module only reads lightweight columns, except the outputs it compacts.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, NamedTuple

from django.db import IntegrityError, OperationalError
from django.db.models import OuterRef, Subquery
from django.utils import timezone
from toolscope_agent.engine.compaction import artifact_id, compact, rule_for, rules_from_policy
from toolscope_agent.engine.duplicates import MCP_GATEWAY, placeholder_text

from toolscope.policies.models import ToolVersion
from toolscope.policies.services.documents import policy_outputs_for_processing
from toolscope.telemetry.models import AdvertisedSet, Artifact, ModelPrice, Project, Session, ToolCall, Turn
from toolscope.telemetry.retention import Days, days_of, days_within, expiry_day
from toolscope.telemetry.selectors import call_values
from toolscope.telemetry.services.bulk import rows_insert, rows_update
from toolscope.telemetry.services.costs import TURN_COSTS, cost_values, session_costs
from toolscope.telemetry.services.hourly_deltas import CALL_VALUES, HourlyDelta
from toolscope.telemetry.services.quarantine import failure_reason
from toolscope.telemetry.services.retention import with_partitions
from toolscope.telemetry.services.rollups import Slice
from toolscope.tokenizer import count_many, counter

NEAR_WINDOW_SHARE = 0.8


class BatchConflictError(OperationalError):
    """Turns or calls of this batch were stored by a concurrent worker meanwhile (the same events
    in two batches): worth a retry, which skips them. An OperationalError, so tasks retry it as
    they retry the database blinking."""

CALL_FIELDS = (
    "id", "session_id", "client_id", "call_id", "tool_name", "turn_index", "started_at", "status", "output_hash",
    "output_tokens", "duplicate_of_id", "duplicate_tokens", "placeholder", "placeholder_tokens", "artifact_id",
    "artifact__tokens_before", "artifact__tokens_after", "duration_ms", "argument_tokens", "error_text_unflagged",
    "expires_on", "turn_id", "model",
)
TURN_FIELDS = (
    "id", "session_id", "index", "started_at", "new_message_tokens", "system_prompt_tokens", "advertised_set_id",
    "input_tokens", "output_tokens", "schema_tokens", "message_tokens", "call_tokens", "tool_output_tokens",
    "estimated_input_tokens", "window_share", "near_window", "expires_on", "model", "time_known",
    "system_prompt_hash", "cached_tokens", "cache_write_tokens", "cache_write_1h_tokens", *TURN_COSTS,
)


# Accounting columns of a call not stored yet, before linking sets what applies.
NEW_CALL_ACCOUNTING = {"duplicate_of_id": None, "duplicate_tokens": 0, "placeholder": "", "placeholder_tokens": None,
                       "artifact_id": None}


class SessionBefore(NamedTuple):
    """A stored session as it was before the batch: what its rows were counted under."""

    started_at: datetime
    agent_name: str
    model: str


@dataclass
class CallState:
    row: dict[str, Any]
    changes: dict[str, Any] = field(default_factory=dict)
    # The whole row of a call this batch brings (None for a stored one): inserted with `changes`.
    new: dict[str, Any] | None = None

    @classmethod
    def fresh(cls, row: dict[str, Any]) -> CallState:
        new = {**row, **NEW_CALL_ACCOUNTING}
        return cls({name: new.get(name) for name in CALL_FIELDS}, new=new)

    @property
    def sort_key(self) -> tuple[Any, ...]:
        return self.row["session_id"], self.row["turn_index"], self.row["started_at"], self.row["id"]

    def get(self, name: str) -> Any:
        return self.changes.get(name, self.row[name])

    def set(self, name: str, value: Any) -> None:
        if name not in self.row or self.row[name] != value:
            self.changes[name] = value

    def values(self) -> dict[str, Any]:
        """The accounting values the rollups sum, as they are now."""
        return {name: self.get(name) for name in CALL_VALUES}


def sessions_account(
    *, project: Project, sessions_before: Mapping[int, SessionBefore | None],
    new_turns: Sequence[dict[str, Any]] = (), new_calls: Sequence[dict[str, Any]] = (),
    stored_days: Days | None = None,
) -> None:
    """Account the sessions (`sessions_before`: their ids, and each one as it was before this
    batch, None for a new one): their stored turns and calls, and `new_turns` and `new_calls` (rows of
    Turn and ToolCall fields not stored yet, ids drawn), which are inserted here with their
    budgets and links, so a batch's rows are written once instead of inserted and then updated.
    What all this changed is added to the hourly rollups (hourly_deltas.py). `stored_days`: the
    expiry days the sessions' stored rows lie in (retention.days_of), None if not known.

    The caller holds the sessions' row locks: two batches of one session never account it at once."""
    session_ids = sorted(sessions_before)
    if not session_ids:
        return
    outputs = policy_outputs_for_processing(project=project)
    suppress = bool(outputs.get("duplicates", {}).get("suppress", True))
    # The partitions to look in: the stored rows' days and the new rows' (every one if not known).
    days = None if stored_days is None else days_of(
        (), more=[*stored_days, *(row["expires_on"] for row in [*new_turns, *new_calls])])
    stored = call_values(ToolCall.objects.filter(session_id__in=session_ids), CALL_FIELDS, days)
    calls = sorted([CallState(row) for row in stored] + [CallState.fresh(row) for row in new_calls],
                   key=lambda call: call.sort_key)
    delta = HourlyDelta(project.pk)
    fresh_turns = {row["id"]: {**row} for row in new_turns}
    turns = sorted(
        [*Turn.objects.filter(days_within(days), session_id__in=session_ids).values(*TURN_FIELDS),
         *({name: row.get(name) for name in TURN_FIELDS} for row in fresh_turns.values())],
        key=lambda turn: (turn["session_id"], turn["index"], turn["started_at"], turn["id"]),
    )
    # The sessions as this batch left them (processing stored their fields before accounting).
    now = {pk: SessionBefore(*values) for pk, *values in
           Session.objects.filter(pk__in=session_ids).values_list("pk", "started_at", "agent_name", "model")}
    slices = _Slices(sessions_before, now, turns, fresh_turns)
    _duplicates_link(calls, project, days)
    _compaction_apply(calls, project, rules_from_policy(outputs), skip_duplicates=suppress, days=days)
    _calls_model(calls, slices)
    _calls_save(calls, days)
    _calls_delta(delta, calls, slices)
    _advertised_sets_price(project, {t["advertised_set_id"] for t in turns if t["advertised_set_id"]})
    budgets = _budgets_save(project, turns, calls, fresh_turns, delta, slices, suppress=suppress, days=days)
    if fresh_turns:
        _calls_link_turns(session_ids, days)
    _advertised_delta(delta, turns, fresh_turns, slices)
    expiry = {pk: expiry_day(retention_days=project.retention_days, moment=session.started_at)
              for pk, session in now.items()}
    first: dict[int, date] = {}
    for row in [*(call.row for call in calls), *turns]:
        sid = row["session_id"]
        expiry[sid] = max(expiry[sid], row["expires_on"])
        first[sid] = min(first.get(sid, row["expires_on"]), row["expires_on"])
    _sessions_summarize(session_ids, calls, budgets, expiry, first)
    # A session's own hour counts it, even when its turns fall in later hours; in its own slice.
    for pk, session in now.items():
        before = sessions_before[pk]
        delta.session(None if before is None else (before.started_at, (before.agent_name, before.model)),
                      (session.started_at, (session.agent_name, session.model)))
    delta.apply()


class _Slices:
    """Each row's rollup slice (agent, model) before and after the batch (hourly_deltas.py): a
    turn's is its session's agent and its own model; a call's its session's agent and its turn's
    model, "" while it has no turn (kept on the call's row); a call without one is linked here to
    the first turn of its index by (start, id), as `_calls_link_turns` links it."""

    def __init__(self, before: Mapping[int, SessionBefore | None], after: Mapping[int, SessionBefore],
                 turns: list[dict[str, Any]], fresh: Mapping[int, Any]) -> None:
        self.agents_before = {pk: session.agent_name for pk, session in before.items() if session is not None}
        self.agents_after = {pk: session.agent_name for pk, session in after.items()}
        self.models = {turn["id"]: turn["model"] or "" for turn in turns}
        self.fresh = fresh
        self.first: dict[tuple[int, int], int] = {}
        for turn in sorted(turns, key=lambda turn: (turn["started_at"], turn["id"])):
            self.first.setdefault((turn["session_id"], turn["index"]), turn["id"])

    def turn(self, turn: Mapping[str, Any], *, before: bool = False) -> Slice:
        agents = self.agents_before if before else self.agents_after
        return agents.get(turn["session_id"], ""), turn["model"] or ""

    def call(self, call: CallState, *, before: bool = False) -> Slice:
        """Before: as the call's row holds it (what it was counted under). After: as `_calls_model`
        writes it."""
        session, turn_id = call.row["session_id"], call.row["turn_id"]
        if before:
            return self.agents_before.get(session, ""), call.row["model"] or ""
        if turn_id is None and self.fresh:
            turn_id = self.first.get((session, call.row["turn_index"]))
        return self.agents_after[session], self.models.get(turn_id, "")


def _calls_model(calls: list[CallState], slices: _Slices) -> None:
    """Each call's `model` column: its turn's, as the rollups slice it (a rebuild reads it back)."""
    for call in calls:
        call.set("model", slices.call(call)[1])


def _calls_delta(delta: HourlyDelta, calls: list[CallState], slices: _Slices) -> None:
    """The calls' part of the rollup delta: new calls added, stored ones that changed (values or
    slice) taken back and re-added."""
    before, after = [], []
    for call in calls:
        key = (call.row["session_id"], call.row["turn_index"], call.row["tool_name"], call.row["started_at"])
        now = slices.call(call)
        after.append((*key, now))
        if call.new is not None:
            delta.call(call.values(), +1, now)
            continue
        then = slices.call(call, before=True)
        before.append((*key, then))
        if call.changes or then != now:
            delta.call({name: call.row[name] for name in CALL_VALUES}, -1, then)
            delta.call(call.values(), +1, now)
    if before != after:
        delta.turns_called(before=before, after=after)


def _advertised_delta(delta: HourlyDelta, turns: list[dict[str, Any]], fresh: Mapping[int, Any],
                      slices: _Slices) -> None:
    """New turns' advertised tools added; a stored turn's moved when its slice did."""
    added = [(turn, slices.turn(turn)) for turn in turns if turn["id"] in fresh]
    moved = [turn for turn in turns if turn["id"] not in fresh and slices.turn(turn, before=True) != slices.turn(turn)]
    delta.advertised([*added, *((turn, slices.turn(turn)) for turn in moved)])
    if moved:
        delta.advertised([(turn, slices.turn(turn, before=True)) for turn in moved], sign=-1)


def _duplicates_link(calls: list[CallState], project: Project, days: Days | None) -> None:
    first: dict[tuple[int, str, str], CallState] = {}
    repeats: list[tuple[CallState, CallState]] = []
    for call in calls:
        key = (call.row["session_id"], call.row["tool_name"], call.row["output_hash"])
        original = first.setdefault(key, call) if call.row["output_hash"] else call
        if original is call:
            call.set("duplicate_of_id", None)
            call.set("duplicate_tokens", 0)
            call.set("placeholder", "")
            call.set("placeholder_tokens", None)
            continue
        repeats.append((call, original))
    cited = _cited_arguments([original for _, original in repeats], days) if repeats else {}
    for call, original in repeats:
        call.set("duplicate_of_id", original.row["id"])
        call.set("duplicate_tokens", call.row["output_tokens"] or 0)
        call.set("placeholder", placeholder_text(
            tool_name=call.row["tool_name"],
            first_call_id=original.row["call_id"] or original.row["client_id"],
            turn_index=original.row["turn_index"],
            first_arguments=cited.get(original.row["id"]),
        ))
    _placeholders_count(calls, project)


def _cited_arguments(originals: list[CallState], days: Days | None) -> dict[int, Any]:
    """The (recorded) arguments of the originals whose placeholder cites them: the calls of
    sessions recorded through the MCP gateway, where the model saw no call id (duplicates.py)."""
    gateway = set(Session.objects.filter(
        pk__in={call.row["session_id"] for call in originals}, metadata__gateway=MCP_GATEWAY,
    ).values_list("pk", flat=True))
    wanted = [call for call in originals if call.row["session_id"] in gateway]
    cited = {call.row["id"]: call.new["arguments"] for call in wanted if call.new is not None}
    stored = [call.row["id"] for call in wanted if call.new is None]
    if stored:
        cited.update((row["id"], row["arguments"])
                     for row in call_values(ToolCall.objects.filter(pk__in=stored), ("id", "arguments"), days))
    return {pk: arguments if isinstance(arguments, Mapping) else {} for pk, arguments in cited.items()}


def _placeholders_count(calls: list[CallState], project: Project) -> None:
    pending = [c for c in calls if c.get("placeholder")
               and ("placeholder" in c.changes or c.get("placeholder_tokens") is None)]
    texts = sorted({c.get("placeholder") for c in pending})
    tokens = dict(zip(texts, count_many(texts, project.encoding), strict=True))
    for call in pending:
        call.set("placeholder_tokens", tokens[call.get("placeholder")])


def _compaction_apply(calls: list[CallState], project: Project, rules: list[Any], *, skip_duplicates: bool,
                      days: Days | None) -> None:
    wanted: dict[int, Any] = {}
    for call in calls:
        if call.row["artifact_id"] or (skip_duplicates and call.get("duplicate_of_id")):
            continue
        rule = rule_for(call.row["tool_name"], rules)
        if rule is not None and (call.row["output_tokens"] or 0) > rule.max_tokens:
            wanted[call.row["id"]] = rule
    if not wanted:
        return
    count = counter(project.encoding)
    outputs = {call.row["id"]: call.new["output"] for call in calls if call.new and call.row["id"] in wanted}
    outputs.update(ToolCall.objects.filter(days_within(days), pk__in=wanted.keys() - outputs.keys())
                   .values_list("pk", "output"))
    now = timezone.now()
    artifacts = {}
    for call in calls:
        rule = wanted.get(call.row["id"])
        if rule is None:
            continue
        original = outputs[call.row["id"]]
        # The content id is what the agent computed when it compacted the same output (and what
        # the compacted text names), so it can retrieve the original without being told the row.
        content_id = artifact_id(original)
        # The output's count is known: compaction only counts candidates.
        result = compact(original, strategy=rule.strategy, max_tokens=rule.max_tokens, count=count,
                         tokens=call.row["output_tokens"], artifact_id=content_id)
        artifacts[call.row["id"]] = {
            "id": uuid.uuid4(), "project_id": project.pk, "content_id": content_id, "original": original,
            "compacted": result.text,
            "tokens_before": result.tokens_before, "tokens_after": result.tokens_after, "strategy": result.strategy,
            "created_at": now, "expires_on": call.row["expires_on"],  # its call's partition day
        }
        call.set("artifact_id", artifacts[call.row["id"]]["id"])
        call.set("output", result.text)
        # Read-only columns of the artifact's row, kept beside the call's own: never in `changes`.
        call.row["artifact__tokens_before"] = result.tokens_before
        call.row["artifact__tokens_after"] = result.tokens_after
    with_partitions(lambda: rows_insert(Artifact, list(artifacts.values())))


def _insert_new(model: type[Turn | ToolCall], rows: list[dict[str, Any]]) -> None:
    try:
        with_partitions(lambda: rows_insert(model, rows))
    except IntegrityError as exc:
        # Another worker stored some of these rows (the same events in two batches) since they
        # were looked up; its transaction has committed by now, so a retry skips them.
        raise BatchConflictError(failure_reason(exc)) from exc


def _calls_save(calls: list[CallState], days: Days | None) -> None:
    """New calls are inserted whole. For stored ones an update writes every listed field of every
    row, so rows are grouped by which fields changed: a row never gets a column it did not change
    (outputs are not even loaded)."""
    _insert_new(ToolCall, [{**call.new, **call.changes} for call in calls if call.new is not None])
    groups: dict[tuple[str, ...], list[ToolCall]] = defaultdict(list)
    for call in calls:
        if call.new is None and call.changes:
            names = tuple(sorted(call.changes))
            groups[names].append(ToolCall(pk=call.row["id"], **call.changes))
    for names, rows in groups.items():
        rows_update(ToolCall, [name.removesuffix("_id") for name in names], rows, days=days)


def _advertised_sets_price(project: Project, set_ids: set[int]) -> None:
    """Schema tokens of each advertised set whose price is still unknown: the sum of its tools'
    schema costs by schema hash. A set with a definition never seen stays unpriced until it is."""
    sets = list(AdvertisedSet.objects.filter(pk__in=set_ids, schema_tokens__isnull=True))
    if not sets:
        return
    hashes = {tool["schema_hash"] for s in sets for tool in s.tools}
    priced = dict(
        ToolVersion.objects.filter(tool__project=project, schema_hash__in=hashes, schema_tokens__isnull=False)
        .values_list("schema_hash", "schema_tokens")
    )
    done = []
    for advertised in sets:
        costs = [priced.get(tool["schema_hash"]) for tool in advertised.tools]
        if None not in costs:
            advertised.schema_tokens = sum(costs)
            done.append(advertised)
    AdvertisedSet.objects.bulk_update(done, ["schema_tokens"])


def _effective_tokens(call: CallState, *, suppress: bool) -> int:
    if suppress and call.get("duplicate_of_id"):
        return call.get("placeholder_tokens") or 0
    if call.get("artifact_id"):
        return call.row["artifact__tokens_after"] or 0
    return call.row["output_tokens"] or 0


def _budgets_save(
    project: Project, turns: list[dict[str, Any]], calls: list[CallState], fresh: dict[int, dict[str, Any]],
    delta: HourlyDelta, slices: _Slices, *, suppress: bool, days: Days | None,
) -> dict[int, list[dict[str, Any]]]:
    """Each turn's budget: new turns (`fresh`, by id) are inserted with theirs, stored ones updated
    where it changed, and either way the rollup delta takes the change. Returned per session for
    the summaries."""
    set_tokens = dict(AdvertisedSet.objects.filter(
        pk__in={t["advertised_set_id"] for t in turns if t["advertised_set_id"]}
    ).values_list("pk", "schema_tokens"))
    # Per session and turn index, the calls' (effective output, argument) tokens.
    by_turn: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for call in calls:
        tokens = by_turn[call.row["session_id"]][call.row["turn_index"]]
        tokens[0] += _effective_tokens(call, suppress=suppress)
        tokens[1] += call.row["argument_tokens"] or 0
    by_session: dict[int, list[dict[str, Any]]] = defaultdict(list)
    budgets = []
    # Messages of the turns before this index, and of the first turn at this index.
    earlier = at_index = carried = arguments = 0
    session = index = None
    pending: list[tuple[int, list[int]]] = []
    for turn in turns:
        if turn["session_id"] != session:
            session, index, earlier, at_index, carried, arguments = turn["session_id"], None, 0, 0, 0, 0
            pending = sorted(by_turn[session].items(), reverse=True)
        if turn["index"] != index:
            # Turns sharing an index carry one history (a retry, two branches): each adds its own
            # new messages to what came before the index, and the first's go on to later turns.
            earlier += at_index
            index, at_index = turn["index"], turn["new_message_tokens"] or 0
        # Calls made in earlier turns are in this request's history: the model's calls with their
        # arguments, and their outputs. Walked by the calls' own indexes, never over the gap
        # between two turn indexes (a client's number).
        while pending and pending[-1][0] < turn["index"]:
            output, argument = pending.pop()[1]
            carried += output
            arguments += argument
        messages = earlier + (turn["new_message_tokens"] or 0)
        budget = _budget(turn, project, schema=set_tokens.get(turn["advertised_set_id"]) or 0,
                         messages=messages, calls=arguments, outputs=carried)
        budgets.append(budget)
    _costs_add(project, turns, budgets)
    for turn, budget in zip(turns, budgets, strict=True):
        by_session[turn["session_id"]].append(
            {**budget, "input_tokens": turn["input_tokens"], "output_tokens": turn["output_tokens"]})
    changed = []
    for turn, budget in zip(turns, budgets, strict=True):
        now = slices.turn(turn)
        if turn["id"] in fresh:
            fresh[turn["id"]].update(budget)
            delta.turn({**turn, **budget}, +1, now)
            continue
        then = slices.turn(turn, before=True)
        updated = any(turn[name] != value for name, value in budget.items())
        if updated:
            changed.append(Turn(pk=turn["id"], **budget))
        if updated or then != now:
            delta.turn(turn, -1, then)
            delta.turn({**turn, **budget}, +1, now)
    _insert_new(Turn, list(fresh.values()))
    rows_update(Turn, BUDGET_FIELDS, changed, days=days)
    return by_session


def _costs_add(project: Project, turns: list[dict[str, Any]], budgets: list[dict[str, Any]]) -> None:
    """Each turn's dollars (TURN_COSTS) into its budget: its session's requests priced in order
    under the provider's cache, with the budgets just computed (telemetry/services/costs.py)."""
    overrides = list(ModelPrice.objects.filter(project_id=project.pk))
    prices: dict[Any, Any] = {}
    sessions: dict[int, list[int]] = defaultdict(list)
    for position, turn in enumerate(turns):
        sessions[turn["session_id"]].append(position)
    for positions in sessions.values():
        costs = session_costs(turns=[{**turns[p], **budgets[p]} for p in positions], overrides=overrides,
                              prices=prices)
        for position, cost in zip(positions, costs, strict=True):
            budgets[position].update(cost_values(cost))


def _calls_link_turns(session_ids: list[int], days: Days | None) -> None:
    """Calls stored before their turn arrived get linked to it."""
    ToolCall.objects.filter(days_within(days), session_id__in=session_ids, turn__isnull=True).update(
        turn_id=Subquery(
            Turn.objects.filter(days_within(days), session_id=OuterRef("session_id"), index=OuterRef("turn_index"))
            .order_by("started_at", "pk").values("pk")[:1]
        )
    )


SUMMARY_FIELDS = ("turn_count", "tool_call_count", "error_count", "duplicate_tokens", "max_window_share",
                  "near_window", "total_tokens", "cost_nanos", "expires_on", "first_expires_on")


def _sessions_summarize(
    session_ids: list[int], calls: list[CallState], budgets: dict[int, list[dict[str, Any]]],
    expiry: dict[int, date], first: dict[int, date],
) -> None:
    summaries = {sid: Session(pk=sid, tool_call_count=0, error_count=0, duplicate_tokens=0, expires_on=expiry[sid],
                              first_expires_on=first.get(sid, expiry[sid]))
                 for sid in session_ids}
    for call in calls:
        summary = summaries[call.row["session_id"]]
        summary.tool_call_count += 1
        summary.error_count += call.row["status"] != "ok"
        summary.duplicate_tokens += call.get("duplicate_tokens") or 0
    for sid, summary in summaries.items():
        summary.duplicate_tokens = _capped(summary.duplicate_tokens)
        shares = [b["window_share"] for b in budgets.get(sid, ())]
        summary.turn_count = len(shares)
        summary.max_window_share = max(shares, default=None)
        summary.near_window = any(b["near_window"] for b in budgets.get(sid, ()))
        summary.total_tokens, summary.cost_nanos = session_totals(budgets.get(sid, ()))
    rows_update(Session, SUMMARY_FIELDS, list(summaries.values()))


def session_totals(turns: Sequence[dict[str, Any]]) -> tuple[int, int | None]:
    """A session's tokens (each request's input as the provider reported it, else as estimated,
    and its output) and its dollars in billionths (None when no request was priced)."""
    tokens, costs = 0, [turn["cost_nanos"] for turn in turns if turn.get("cost_nanos") is not None]
    for turn in turns:
        reported = turn["input_tokens"]
        tokens += (reported if reported is not None else turn["estimated_input_tokens"] or 0)
        tokens += turn["output_tokens"] or 0
    return tokens, (sum(costs) if costs else None)


BUDGET_FIELDS = ("schema_tokens", "message_tokens", "call_tokens", "tool_output_tokens", "estimated_input_tokens",
                 "window_share", "near_window", *TURN_COSTS)


def _budget(
    turn: dict[str, Any], project: Project, *, schema: int, messages: int, calls: int, outputs: int
) -> dict[str, Any]:
    estimate = (turn["system_prompt_tokens"] or 0) + schema + messages + calls + outputs
    # The provider's count is what the request really used; the estimate is what the policy
    # would leave. Near-window means the larger of the two is over 80% of the window.
    share = max(estimate, turn["input_tokens"] or 0) / project.context_window
    # Running sums over a session are a client's to grow without end; an integer column holds
    # 2^31 - 1, which is far past any context window, so the sums stop there.
    return {"schema_tokens": _capped(schema), "message_tokens": _capped(messages), "call_tokens": _capped(calls),
            "tool_output_tokens": _capped(outputs), "estimated_input_tokens": _capped(estimate),
            "window_share": round(share, 4), "near_window": share > NEAR_WINDOW_SHARE}


MAX_COLUMN_INT = 2**31 - 1


def _capped(value: int) -> int:
    return min(value, MAX_COLUMN_INT)
