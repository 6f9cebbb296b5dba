"""Rendering a Selection into what a provider request carries, and pricing it.

A `Selection` (engine/selection.py) names the tool definitions to send; this module turns it into
the `tools` array of an OpenAI Chat Completions request, an Anthropic Messages request, or
toolscope's own plain shape, and builds the compact menu that progressive mode puts in the
prompt. The token cost of a selection is computed from the same renderings (`selection_cost`,
through engine/tokens.py), so what is counted is what is sent.

Schemas are passed through as the agent wrote them (key order kept, no copy of nested values):
the property order an author chose is part of what the model reads. tokens.py sorts keys when
counting, so the cost does not depend on that order.

Pure: the standard library only, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolscope_agent.engine.bytecache import ByteDict, ByteLRU
from toolscope_agent.engine.compaction import RETRIEVE_TOOL_NAME
from toolscope_agent.engine.tokens import TokenCounter, tools_tokens

if TYPE_CHECKING:  # selection imports this module at run time; only the type flows back
    from toolscope_agent.engine.selection import Selection

SEARCH_TOOL_NAME = "tool_search"
"""toolscope's own search tool, replaced by the provider's when `provider_search` is on."""

SEARCH_TOOL: dict[str, Any] = {
    "name": SEARCH_TOOL_NAME,
    "description": "Find more tools for the task. Say in a few words what you need to do; the tools "
                   "that fit best are listed and can be called from the next step on.",
    "input_schema": {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What you need to do, in a few words."}},
        "required": ["query"],
    },
}
"""The `tool_search` tool sent in `tool_search` mode when the agent's catalog has none of its own
(the SDK's selector and the MCP gateway add it; simulations and recommendations price it)."""

# Anthropic's server-side tool search (public beta, header "advanced-tool-use-2025-11-20"), as
# documented at https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool:
# the request carries one search tool entry, {"type": "tool_search_tool_regex_20251119",
# "name": "tool_search_tool_regex"} (Claude writes Python regexes) or
# {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"} (natural-language
# queries), and every tool to be discovered on demand carries "defer_loading": true. The search
# tool itself must not be deferred, and at least one tool must stay loaded.
ANTHROPIC_SEARCH_TOOLS: dict[str, dict[str, str]] = {
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
}

IN_CONVERSATION = frozenset({"loaded", "discovered"})
"""Selection reasons of tools a provider's deferred loading has put inside the conversation (a
search loaded them, or the model called them after one did): they stay deferred in the list."""

RETRIEVE_TOOL: dict[str, Any] = {
    "name": RETRIEVE_TOOL_NAME,
    "description": "Get the full original of a tool output that was shortened. Pass the id its "
                   'note names: [… omitted; full output: retrieve_tool_output(id="…")].',
    "input_schema": {
        "type": "object",
        "properties": {"id": {"type": "string", "description": "The id in the shortened output's note."}},
        "required": ["id"],
    },
}
"""The tool that gives a compacted output's original back (compaction.py names its id)."""

FORMATS: tuple[str, ...] = ("openai", "anthropic", "openai_responses", "plain")
"""`render`'s formats: Chat Completions, Anthropic Messages, the Responses API, toolscope's own."""

MENU_ACTIVE_MARK = "*"
MENU_SENTENCE_LIMIT = 160
"""A menu line stops after this many characters of description: the menu exists to be cheap."""

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
# Bounded by bytes (engine/bytecache.py): a key holds a whole description, or a whole catalog's.
_SENTENCE_CACHE: ByteDict[tuple[str, int], str] = ByteDict(8 * 1024 * 1024)
_MENU_CACHE: ByteLRU[tuple[tuple[str, ...], tuple[str, ...]], tuple[list[str], dict[str, int]]] = ByteLRU(
    32 * 1024 * 1024)


def _description(tool: Mapping[str, Any]) -> str:
    description = tool.get("description")
    return description if isinstance(description, str) else ""


def _schema(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    schema = tool.get("input_schema")
    return schema if isinstance(schema, Mapping) else {}


def first_sentence(text: str, limit: int = MENU_SENTENCE_LIMIT) -> str:
    """The first sentence of `text`'s first paragraph, whitespace collapsed, at most `limit` chars.

    A sentence ends at `.`, `!` or `?` followed by whitespace or the end (so "v1.2" and
    "file.read" do not end it; an abbreviation like "e.g. " does). Longer text is cut at the last
    word boundary before `limit` and ends with "…". Used by the menu and by search summaries, so
    one tool reads the same in both.
    """
    key = (text, limit)
    cached = _SENTENCE_CACHE.get(key)
    if cached is not None:
        return cached
    paragraph = " ".join(_PARAGRAPH_BREAK.split(text.strip(), maxsplit=1)[0].split())
    end = _SENTENCE_END.search(paragraph)
    sentence = paragraph[: end.end()] if end else paragraph
    if len(sentence) > limit:
        cut = sentence[: limit - 1]
        space = cut.rfind(" ")
        sentence = (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"
    return _SENTENCE_CACHE.add(key, sentence, 2 * (len(text) + len(sentence)) + 200)


def _inactive_line(name: str, description: str) -> str:
    sentence = first_sentence(description)
    return f"- {name}: {sentence}" if sentence else f"- {name}"


def _inactive_lines(names: tuple[str, ...], descriptions: tuple[str, ...]) -> tuple[list[str], dict[str, int]]:
    """Every tool's inactive menu line and each name's line number, memoised per catalog content.

    Progressive mode rebuilds the menu on every turn, usually for the same catalog; keyed by the
    names and descriptions themselves (not by object identity), a hit is exact even when the
    caller rebuilt or mutated its catalog, and a turn only patches the few active lines.
    """
    key = (names, descriptions)
    cached = _MENU_CACHE.get(key)
    if cached is None:
        lines = list(map(_inactive_line, names, descriptions))
        cached = _MENU_CACHE.put(key, (lines, {name: index for index, name in enumerate(names)}))
    return cached


def menu_instructions(hint_prefix: str = "$") -> str:
    """The line that opens a menu and tells the model how to activate a tool."""
    return (f"Tools you can use (write {hint_prefix}name to load a tool's full schema; "
            f"lines marked {MENU_ACTIVE_MARK} are loaded):")


def menu_from_names(names: Sequence[str], descriptions: Sequence[Any], active: Iterable[str], *,
                    hint_prefix: str = "$") -> str:
    """`menu_text` for parallel lists of distinct names and descriptions (the selection's fast path)."""
    if not names:
        return ""
    if not set(map(type, descriptions)) <= {str}:
        descriptions = [text if isinstance(text, str) else "" for text in descriptions]
    lines, line_of = _inactive_lines(tuple(names), tuple(descriptions))
    lines = lines.copy()
    for name in active:
        index = line_of.get(name)
        if index is not None:
            lines[index] = f"{MENU_ACTIVE_MARK} {name} (active)"
    return menu_instructions(hint_prefix) + "\n" + "\n".join(lines)


def menu_text(tools: Iterable[Mapping[str, Any]], active: Collection[str], *, hint_prefix: str = "$") -> str:
    """Progressive mode's menu: the instructions line, then one line per tool, in the given order.

    An inactive tool reads "- name: first sentence"; an active one "* name (active)" (its full
    schema, description included, is in the request already). Entries without a string name are
    skipped, and a repeated name keeps its first entry. No tools gives "" (no menu, rather than
    instructions about nothing).
    """
    by_name: dict[str, Mapping[str, Any]] = {}
    for tool in tools:
        name = tool.get("name")
        if isinstance(name, str) and name not in by_name:
            by_name[name] = tool
    return menu_from_names(list(by_name), [tool.get("description") for tool in by_name.values()], active,
                           hint_prefix=hint_prefix)


def _plain(tool: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": tool.get("name", ""), "description": _description(tool), "input_schema": _schema(tool)}


def _anthropic(tool: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": tool.get("name", "")}
    if description := _description(tool):
        entry["description"] = description
    entry["input_schema"] = _schema(tool)
    return entry


def _openai(tool: Mapping[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.get("name", "")}
    if description := _description(tool):
        function["description"] = description
    function["parameters"] = _schema(tool)
    return {"type": "function", "function": function}


def render_openai(selection: Selection) -> list[dict[str, Any]]:
    """Chat Completions `tools` entries for the tools sent in full.

    An empty description is left out, as OpenAI clients leave it out (and as tokens.py counts it).
    Deferred tools are not rendered: OpenAI has no equivalent of Anthropic's defer_loading here;
    progressive mode's menu goes in the prompt instead.
    """
    return [_openai(tool) for tool in selection.tools]


def render_anthropic(selection: Selection, *, provider_search: bool = False,
                     search_variant: str = "regex", defer: bool = False) -> list[dict[str, Any]]:
    """Messages API `tools` entries for the tools sent in full.

    With `provider_search`, Anthropic's own tool search replaces toolscope's: its search tool
    entry comes first (`search_variant` "regex" or "bm25"), then the tools sent in full except
    toolscope's `tool_search`, then every other allowed tool with `"defer_loading": true`, which
    the provider loads when its search finds them. With `defer` (the policy's `defer_loading`),
    toolscope's `tool_search` stays, a client-side search whose answers are `tool_reference`
    blocks (`search_references`) that load deferred tools the same way. Either way a tool a
    search loaded, or one called after, is inside the conversation: it stays deferred in the
    list, which keeps one order (the catalog's) so the provider's prompt cache keeps it. Nothing
    deferred means nothing to search: Anthropic's search tool is then left out.
    """
    if not provider_search and not defer:
        return [_anthropic(tool) for tool in selection.tools]
    if provider_search and search_variant not in ANTHROPIC_SEARCH_TOOLS:
        raise ValueError(f"unknown search_variant {search_variant!r}; allowed: {', '.join(ANTHROPIC_SEARCH_TOOLS)}")
    head, rest = _deferral(selection, keep_search=not provider_search)
    loaded = [_anthropic(tool) for tool in head]
    deferred = [{**_anthropic(tool), "defer_loading": True} for tool in rest]
    if not deferred or not provider_search:
        return [*loaded, *deferred]
    return [dict(ANTHROPIC_SEARCH_TOOLS[search_variant]), *loaded, *deferred]


def _deferral(selection: Selection, *, keep_search: bool) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(the tools at the head of the list, the deferred ones), for a provider's deferred loading:
    the head is what the selection sends, less what is inside the conversation (IN_CONVERSATION)
    and, unless `keep_search`, toolscope's `tool_search`; every other allowed tool is deferred, in
    catalog order."""
    reasons = selection.reasons
    head = [tool for tool in selection.tools if reasons.get(tool.get("name", "")) not in IN_CONVERSATION
            and (keep_search or tool.get("name") != SEARCH_TOOL_NAME)]
    taken = {tool.get("name") for tool in head}
    pool = selection.allowed or [*selection.tools, *selection.deferred]
    return head, [tool for tool in pool if tool.get("name") not in taken and tool.get("name") != SEARCH_TOOL_NAME]


def search_references(names: Sequence[str]) -> list[dict[str, str]]:
    """A client-side tool search's answer as Anthropic loads it: the `content` of the
    `tool_result` answering toolscope's `tool_search` under a policy that defers loading (one
    `tool_reference` block per tool found; the API expands each into its deferred definition)."""
    return [{"type": "tool_reference", "tool_name": name} for name in names]


def search_output(call_id: str, tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A client-side tool search's answer as the Responses API loads it: the input item answering
    the model's `tool_search_call` (`call_id`) under a policy that defers loading, with the
    definitions of the tools found."""
    return {"type": "tool_search_output", "call_id": call_id, "execution": "client", "status": "completed",
            "tools": [_responses(tool) for tool in tools]}


def _responses(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses API function: `strict` false keeps the schema as the tool wrote it (strict mode
    would reject schemas it cannot enforce; the API's type requires the key)."""
    entry: dict[str, Any] = {"type": "function", "name": tool.get("name", "")}
    if description := _description(tool):
        entry["description"] = description
    entry["parameters"] = _schema(tool)
    entry["strict"] = False
    return entry


def render_openai_responses(selection: Selection, *, provider_search: bool = False,
                            groups: Mapping[str, Sequence[str]] | None = None,
                            defer: bool = False) -> list[dict[str, Any]]:
    """Responses API `tools` entries (`{"type": "function", "name", "description",
    "parameters", "strict": false}`) for the tools sent in full.

    With `provider_search`, OpenAI's hosted `tool_search` replaces toolscope's, as its deferred
    loading asks: `{"type": "tool_search"}` first, then the tools sent in full except toolscope's
    `tool_search`, then every other allowed tool with `"defer_loading": true`, those of a policy
    group (`groups`, name -> members) inside a namespace of that name, the rest on their own.
    With `defer` (the policy's `defer_loading`), the search is toolscope's, executed by the
    client: `{"type": "tool_search", "execution": "client"}` with toolscope's description and
    parameters, its answers a `tool_search_output` item of the tools found. The list stays the
    same from request to request while the catalog does (what a search loaded, or was called
    after, stays deferred), so the provider's prompt cache keeps it; what a search loads
    arrives inside the conversation. Nothing deferred means nothing to search: the search tool
    is then left out."""
    if not provider_search and not defer:
        return [_responses(tool) for tool in selection.tools]
    head, rest = _deferral(selection, keep_search=False)
    loaded = [_responses(tool) for tool in head]
    deferred = {tool.get("name"): {**_responses(tool), "defer_loading": True} for tool in rest}
    if not deferred:
        return loaded
    namespaces = []
    for group, members in (groups or {}).items():
        inside = [deferred.pop(name) for name in dict.fromkeys(members) if name in deferred]
        if inside:
            names = ", ".join(entry["name"] for entry in inside)
            namespaces.append({"type": "namespace", "name": group, "description": f"{group}: {names}",
                               "tools": inside})
    search: dict[str, Any] = {"type": "tool_search"}
    if not provider_search:
        search.update(execution="client", description=SEARCH_TOOL["description"],
                      parameters=SEARCH_TOOL["input_schema"])
    return [search, *loaded, *namespaces, *deferred.values()]


PROVIDER, TOOLSCOPE = "provider", "toolscope"


def deferral(policy: Mapping[str, Any]) -> str:
    """Whose search a policy's deferred loading asks for: PROVIDER (`tool_search.provider_search`),
    TOOLSCOPE (`tool_search.defer_loading`; the provider's wins when both are on), or "" (no
    deferred loading). `policy`: a document, or its `selection` section."""
    section = policy.get("selection") if isinstance(policy.get("selection"), Mapping) else policy
    search = section.get("tool_search") if isinstance(section, Mapping) else None
    if not isinstance(search, Mapping):
        return ""
    if search.get("provider_search"):
        return PROVIDER
    return TOOLSCOPE if search.get("defer_loading") is True else ""


def render(selection: Selection, format: str, policy: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The selection's `tools` array in `format` (FORMATS), as `policy` asks: its
    `tool_search.provider_search` renders Anthropic's and the Responses API's own deferred loading
    with the provider's search, `tool_search.defer_loading` the same loading with toolscope's
    search executed by the client (the Responses API's namespaces from the policy's groups);
    Chat Completions has no deferred loading: the tools sent. The SDK's selector and
    `/policy/resolve` both answer with it."""
    section = policy.get("selection") if isinstance(policy.get("selection"), Mapping) else policy
    deferred = deferral(policy)
    provider, defer = deferred == PROVIDER, deferred == TOOLSCOPE
    if format == "openai":
        return render_openai(selection)
    if format == "anthropic":
        return render_anthropic(selection, provider_search=provider, defer=defer)
    if format == "openai_responses":
        groups = section.get("groups") if isinstance(section, Mapping) else None
        return render_openai_responses(selection, provider_search=provider, defer=defer, groups={
            name: [member for member in members if isinstance(member, str)]
            for name, members in (groups.items() if isinstance(groups, Mapping) else ())
            if isinstance(name, str) and isinstance(members, list | tuple)})
    if format == "plain":
        return render_plain(selection)
    raise ValueError(f"unknown format {format!r}; use {', '.join(FORMATS)}")


def render_plain(selection: Selection) -> list[dict[str, Any]]:
    """toolscope's own shape, {name, description, input_schema}, for agents that render themselves."""
    return [_plain(tool) for tool in selection.tools]


def render_definition(tool: Mapping[str, Any], format: str = "openai") -> dict[str, Any]:
    """One definition in toolscope's shape rendered as `format` ("openai", "anthropic", "plain")."""
    renderers = {"openai": _openai, "anthropic": _anthropic, "plain": _plain}
    if format not in renderers:
        raise ValueError(f"unknown format {format!r}; use {', '.join(FORMATS)}")
    return renderers[format](tool)


def selection_cost(selection: Selection, counter: TokenCounter, flavor: str = "openai") -> int:
    """Estimated tokens the selection puts in a request: each tool sent in full, rendered in
    `flavor` and counted as tokens.py counts definitions, plus the menu text when there is one.

    Deferred tools cost nothing here: they are either absent from the request or, with
    Anthropic's defer_loading, kept out of the context until the provider loads them.
    """
    cost = tools_tokens(selection.tools, counter, flavor)
    if selection.menu:
        cost += counter(selection.menu)
    return cost
