"""ToolSelector: the agent loop's one object for the policy. It combines the catalog, the
published policy (a PolicyCache or a document) and the session's state, and applies them with
the engine the server runs, so its answers equal the server's `POST /api/v1/policy/resolve`.

    selector = ToolSelector(tools, policy_cache)
    tools = selector.tools(task_message, format="anthropic")       # what to send this turn
    ...                                                             # call the model
    selector.observe(model_text, tool_calls)                       # what it asked for
    output = selector.prepare_output("bash", call_id, raw_output)  # duplicates + compaction
    ...                                                             # the model asks for an original:
    selector.retrieve_tool_output(id="…")                           # from memory, else the server

Compaction counts tokens as the server does: with the exact BPE of the policy's `encoding` when
bpe-openai or tiktoken is installed (`selector.tokenizer` says which), chars/4 otherwise. A
compacted output names its original's artifact id (a content hash the server computes alike);
the selector keeps the originals it compacted in an `ArtifactStore` (an LRU bounded by bytes).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolscope_agent.artifacts import ArtifactStore
from toolscope_agent.client import Client
from toolscope_agent.engine.arguments import ArgumentsOutcome, apply_schema_error_policy
from toolscope_agent.engine.compaction import Compacted, artifact_id, compact, rule_for, rules_from_policy
from toolscope_agent.engine.duplicates import DuplicateTracker
from toolscope_agent.engine.redaction import redact_arguments
from toolscope_agent.engine.render import (
    RETRIEVE_TOOL,
    TOOLSCOPE,
    deferral,
    render,
    render_definition,
    search_output,
    search_references,
)
from toolscope_agent.engine.schemas import normalize_tool
from toolscope_agent.engine.search import (
    DEFAULT_TOP_K,
    MAX_TOP_K,
    SearchHit,
    answer_text,
    clamp_top_k,
    ranker_for,
    search_hits,
    search_tools,
    searchable,
)
from toolscope_agent.engine.selection import Selection, SessionState, search_tool_added, select_tools
from toolscope_agent.engine.tokens import TokenCounter
from toolscope_agent.errors import ToolscopeError
from toolscope_agent.policy import PolicyCache
from toolscope_agent.tokenizers import DEFAULT_ENCODING, exact_counter

if TYPE_CHECKING:  # numpy and tokenizers are optional: imported only when a model is given
    from toolscope_agent.semantic import HybridIndex

SEARCH_TOOL = "tool_search"
logger = logging.getLogger("toolscope_agent")


class ToolSelector:
    def __init__(
        self,
        tools: Iterable[Mapping[str, Any]],
        policy: PolicyCache | Mapping[str, Any],
        *,
        state: SessionState | None = None,
        counter: TokenCounter | None = None,
        client: Client | None = None,
        artifacts: ArtifactStore | None = None,
        semantic: Any = None,
    ) -> None:
        """`tools` in any common shape (OpenAI, Anthropic, MCP, toolscope's). `counter` counts
        tokens for compaction budgets; by default the policy encoding's exact BPE (see
        `tokenizer`). `client` lets `retrieve_tool_output` ask the server for originals this
        selector does not hold (its key needs `policy:read`). `artifacts` keeps the originals
        this selector compacted: its own 16 MiB store unless one is shared. `semantic`, a
        `toolscope_agent.semantic.SemanticRanker` (the model installed locally), ranks a policy's
        semantic search here instead of asking the server, when the policy was published with
        the same model; with a `client`, the catalog's embeddings come from the server (computed
        once there), so a search embeds only its query."""
        self.replace_tools(tools)
        self._policy = policy
        self.state = state if state is not None else SessionState()
        self._counter = counter
        self.client = client
        self.artifacts = artifacts if artifacts is not None else ArtifactStore()
        self.duplicates = DuplicateTracker()
        self._turn = 0
        self.semantic = semantic
        self._semantic_identity: str | None = None
        self._hybrid: tuple[Any, HybridIndex] | None = None

    def replace_tools(self, tools: Iterable[Mapping[str, Any]]) -> None:
        """Use `tools` as the catalog from now on (a server's list changed); the session's state
        (discovered, loaded, activated tools, duplicates) is kept."""
        self.catalog: list[dict[str, Any]] = [normalize_tool(dict(tool)) for tool in tools]
        self._by_name = {tool["name"]: tool for tool in self.catalog}

    @property
    def policy(self) -> Mapping[str, Any]:
        return self._policy.get() if isinstance(self._policy, PolicyCache) else self._policy

    @property
    def encoding(self) -> str:
        """The policy's tokenizer encoding (the project's), "o200k_base" when it names none."""
        encoding = self.policy.get("encoding")
        return encoding if isinstance(encoding, str) and encoding else DEFAULT_ENCODING

    @property
    def counter(self) -> TokenCounter:
        """What compaction counts tokens with: the one passed in, else the exact counter of the
        policy's encoding (which follows the policy when it changes)."""
        return self._counter if self._counter is not None else exact_counter(self.encoding)[0]

    @property
    def tokenizer(self) -> str:
        """Which counter compaction uses: "bpe-openai" or "tiktoken" (exact, as the server
        counts), "approximate" (characters/4: neither is installed) or "custom" (passed in)."""
        return "custom" if self._counter is not None else exact_counter(self.encoding)[1]

    def _section(self, name: str) -> Mapping[str, Any]:
        section = self.policy.get(name)
        return section if isinstance(section, Mapping) else {}

    # -- what to send -------------------------------------------------------------------------

    def select(self, message: str = "") -> Selection:
        """This turn's selection; the state notes `message` as the session's task. A searching
        policy (`tool_search` mode, or `tool_search` always on) over a catalog without a
        `tool_search` tool of its own gets toolscope's (engine.render.SEARCH_TOOL); `observe`
        answers its calls."""
        policy = self.policy
        catalog = search_tool_added(self.catalog, policy, has_search_tool=SEARCH_TOOL in self._by_name)
        selection = select_tools(catalog, policy, self.state, message)
        # A later instruction's rules may read this one (rule_window); a kept list, what it sent.
        self.state.note_request(message, selection)
        return selection

    def tools(self, message: str = "", *, format: str = "openai") -> list[dict[str, Any]]:
        """The `tools` array for this turn's request, in the provider's shape: `format` "openai"
        (Chat Completions), "anthropic", "openai_responses" or "plain" (engine.render.render)."""
        return render(self.select(message), format, self.policy)

    def search(self, query: str, top_k: int | None = None) -> list[SearchHit]:
        """What the agent's `tool_search` tool answers: ranked by the policy's ranker, with the
        project's learned history when the policy turns it on (`learned`) and the served
        document carries it (`search_history`). With semantic search on (`semantic`) and a
        `client`, the server ranks (it holds the model) and the hits are this catalog's tools in
        its order; when it cannot be asked, the local lexical ranking answers."""
        settings = self._section("selection").get("tool_search")
        settings = settings if isinstance(settings, Mapping) else {}
        max_top_k = clamp_top_k(settings.get("max_top_k", MAX_TOP_K), MAX_TOP_K)
        wanted = clamp_top_k(top_k if top_k is not None else settings.get("top_k", DEFAULT_TOP_K), max_top_k)
        history = self._section("search_history").get("tools") if settings.get("learned") else None
        history = history if isinstance(history, Mapping) else None
        semantic = settings.get("semantic")
        if isinstance(semantic, Mapping) and query.strip():
            if self.semantic is not None and semantic.get("model") == self._local_identity():
                return self._local_semantic(semantic, settings, history).search(query, wanted, max_top_k=max_top_k)
            if self.client is not None:
                hits = self._server_search(query, wanted, max_top_k)
                if hits is not None:
                    return hits
        return search_tools(self.catalog, query, wanted, max_top_k=max_top_k, ranker=ranker_for(settings),
                            history=history)

    def search_answer(self, query: str, *, format: str = "openai", call_id: str = "",
                      top_k: int | None = None) -> Any:
        """What to answer the model's `tool_search` call with, in the provider's shape: under a
        policy that defers loading (`tool_search.defer_loading`), the references the provider
        loads the tools from (`anthropic`: the `tool_result`'s content, `tool_reference`
        blocks; `openai_responses`: a `tool_search_output` item for `call_id`); otherwise, and in
        Chat Completions, the text answer (engine.search.answer_text). Pass the call to `observe`
        as usual: the state learns what was found."""
        hits = self.search(query, top_k)
        deferring = deferral(self.policy) == TOOLSCOPE
        if deferring and format == "anthropic":
            return search_references([hit.name for hit in hits])
        if deferring and format == "openai_responses":
            return search_output(call_id, [self._by_name[hit.name] for hit in hits if hit.name in self._by_name])
        return answer_text(hits)

    def _local_identity(self) -> str:
        if self._semantic_identity is None:
            from toolscope_agent.semantic import model_identity

            self._semantic_identity = model_identity(self.semantic.path)
        return self._semantic_identity

    def _local_semantic(self, semantic: Mapping[str, Any], settings: Mapping[str, Any],
                        history: Mapping[str, Any] | None) -> HybridIndex:
        """The fused index the server would rank with (same model, fusion and alpha), here: the
        catalog's vectors from the server when a client is given, the query embedded locally."""
        from toolscope_agent.semantic import CONVEX_ALPHA, DEFAULT_FUSION, HybridIndex, ServedVectors

        if self.semantic.store is None and self.client is not None:
            label = self.policy.get("label")
            self.semantic.store = ServedVectors(self.client, label if isinstance(label, str) else "production")
        catalog = searchable(self.catalog)
        key = (tuple((tool["name"], tool.get("description")) for tool in catalog), ranker_for(settings),
               id(history), semantic.get("fusion"), semantic.get("alpha"))
        cached = self._hybrid
        if cached is None or cached[0] != key:
            fusion = semantic.get("fusion", DEFAULT_FUSION)
            alpha = semantic.get("alpha", CONVEX_ALPHA)
            index = HybridIndex(catalog, self.semantic, ranker=ranker_for(settings), history=history,
                                method=fusion if fusion in ("convex", "rrf") else DEFAULT_FUSION,
                                alpha=alpha if isinstance(alpha, (int, float)) and 0 <= alpha <= 1 else CONVEX_ALPHA)
            self._hybrid = cached = (key, index)
        return cached[1]

    def _server_search(self, query: str, wanted: int, max_top_k: int) -> list[SearchHit] | None:
        """The server's ranking of this catalog's tools, or None when it could not be had."""
        assert self.client is not None
        label = self.policy.get("label")
        try:
            answer = self.client.search_tools(query, max_top_k, label=label if isinstance(label, str) else "production")
        except ToolscopeError as exc:
            logger.warning("toolscope search unavailable (%s); ranking locally", exc.message)
            return None
        positions = {tool["name"]: position for position, tool in enumerate(self.catalog)}
        usable = [hit for hit in answer["results"] if isinstance(hit, Mapping) and hit.get("name") in positions
                  and isinstance(hit.get("score"), (int, float))][:wanted]
        ranked = [(float(hit["score"]), positions[hit["name"]]) for hit in usable]
        return search_hits(self.catalog, ranked, {positions[hit["name"]] for hit in usable if hit.get("matched", True)})

    # -- after the model answered -----------------------------------------------------------

    def observe(self, model_output: str = "", tool_calls: Sequence[Mapping[str, Any]] = ()) -> None:
        """Record the model's answer. A tool_search call without `results` is answered here, so
        the tools it finds join the selection from the next turn."""
        calls = [self._with_results(call) for call in tool_calls]
        progressive = self._section("selection").get("progressive")
        prefix = progressive.get("hint_prefix", "$") if isinstance(progressive, Mapping) else "$"
        self.state.observe(model_output, calls, hint_prefix=str(prefix))
        self._turn += 1

    def _with_results(self, call: Mapping[str, Any]) -> Mapping[str, Any]:
        if call.get("name") != SEARCH_TOOL or "results" in call:
            return call
        arguments = call.get("arguments")
        query = arguments.get("query", "") if isinstance(arguments, Mapping) else ""
        return {**call, "results": [hit.name for hit in self.search(str(query))]}

    # -- per-tool settings ------------------------------------------------------------------

    def tool_settings(self, tool_name: str) -> Mapping[str, Any]:
        settings = self._section("tools").get(tool_name)
        return settings if isinstance(settings, Mapping) else {}

    def check_arguments(self, tool_name: str, arguments: Mapping[str, Any]) -> ArgumentsOutcome:
        """Validate a call against the tool's schema under its `on_schema_error` policy
        (return_error, raise or coerce)."""
        schema = self._by_name.get(tool_name, {}).get("input_schema", {})
        policy = str(self.tool_settings(tool_name).get("on_schema_error", "return_error"))
        return apply_schema_error_policy(schema, arguments, policy, tool_name=tool_name)

    def redact(self, tool_name: str, arguments: Mapping[str, Any]) -> Any:
        """Arguments safe to log or send: the tool's redacted keys and secret-looking values cut."""
        return redact_arguments(dict(arguments), set(self.tool_settings(tool_name).get("redact", ())))

    def prepare_output(self, tool_name: str, call_id: str, output: str, *,
                       arguments: Mapping[str, Any] | None = None) -> str:
        """The text to give the model for a tool's output: a placeholder when it repeats an earlier
        output of the same tool (and the policy suppresses duplicates), else the output compacted
        to the policy's rule or the tool's max_result_tokens. `arguments`: where the model never
        sees `call_id` (the MCP gateway), the call's arguments, which a placeholder cites instead."""
        duplicates = self._section("outputs").get("duplicates")
        suppress = duplicates.get("suppress", True) if isinstance(duplicates, Mapping) else True
        placeholder = self.duplicates.check(tool_name, output, call_id=call_id, turn_index=self._turn,
                                            arguments=arguments)
        if placeholder is not None and suppress:
            return placeholder
        compacted = self.compact(tool_name, output)
        return compacted.text if compacted is not None else output

    def compact(self, tool_name: str, output: str) -> Compacted | None:
        """The output cut to the policy's rule for the tool (or its max_result_tokens), naming its
        artifact id; the original is kept in `artifacts`. None when no rule applies.

        The server keeps (and serves) the originals of rule-compacted outputs it records; an
        output cut by max_result_tokens alone is retrievable from this process's memory only."""
        rule = rule_for(tool_name, rules_from_policy(self.policy))
        limit = self.tool_settings(tool_name).get("max_result_tokens")
        if rule is not None:
            strategy, max_tokens = rule.strategy, rule.max_tokens
        elif isinstance(limit, int) and limit > 0:
            strategy, max_tokens = "head_tail", limit
        else:
            return None
        result = compact(output, strategy=strategy, max_tokens=max_tokens, count=self.counter,
                         artifact_id=artifact_id(output))
        if result.changed and result.artifact_id is not None:
            self.artifacts.put(result.artifact_id, output)
        return result

    # -- retrieval ----------------------------------------------------------------------------

    def retrieve_tool(self, format: str = "openai") -> dict[str, Any]:
        """The `retrieve_tool_output` tool's definition in the provider's shape ("openai",
        "anthropic", "plain"); add it to the request's tools so the model can ask for originals."""
        return render_definition(copy.deepcopy(RETRIEVE_TOOL), format)

    def retrieve(self, artifact_id: str) -> str | None:
        """The original named `artifact_id`: from memory, else from the server (and kept in
        memory). None when neither holds it. Raises ToolscopeError when the server cannot be
        asked (unreachable, or the key lacks policy:read)."""
        original = self.artifacts.get(artifact_id)
        if original is not None or self.client is None:
            return original
        try:
            artifact = self.client.get_artifact(artifact_id)
        except ValueError:  # not an id at all: nothing to ask
            return None
        except ToolscopeError as exc:
            if exc.status == 404:
                return None
            raise
        original = artifact.get("original")
        if not isinstance(original, str):
            return None
        self.artifacts.put(artifact_id, original)
        return original

    def retrieve_tool_output(self, id: str) -> str:  # "id": the name of the tool's argument
        """The `retrieve_tool_output` tool's handler: the original, or a sentence for the model
        saying why there is none."""
        try:
            original = self.retrieve(id)
        except ToolscopeError as exc:
            return f"The tool output {id} could not be retrieved now: {exc.message}"
        if original is None:
            return (f"No tool output with id {id} is available. Use the exact id from a shortened "
                    "output's note.")
        return original
