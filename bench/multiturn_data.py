"""Independent multi-turn recordings of a large-catalog agent, built from BFCL's multi-turn data
(issue 25's Goal): the conversations, the 128-tool catalog, and every tool's real output.

Source: the data files and the executable API classes inside the installed `bfcl-eval` wheel
(bench/requirements.txt; the version is printed with every result): the four multi-turn
categories `multi_turn_base`, `multi_turn_miss_param`, `multi_turn_miss_func` and
`multi_turn_long_context` (200 conversations each, 800 in all), their ground truth
(`possible_answer/`), and the function documents of the 8 API suites they use
(`multi_turn_func_doc/`: file system, math, messages, posting, tickets, trading, travel and
vehicle control; 128 tools).

How a recording is made, and why:

- **The agent.** One agent that advertises all 128 tools on every request, as an agent wired to
  eight MCP servers does. BFCL itself offers each conversation only its own 1-3 suites; a
  general agent does not know in advance which suites a user will need.
- **The calls.** BFCL's ground truth: per user turn, the calls a correct model makes, in order.
  Each call is one model request (an assistant message with that one tool call), followed by a
  last request per turn that answers in text; a turn with no ground-truth call (miss_func's
  turn whose function is missing, a few chit-chat turns) is that one text request.
- **The outputs.** Every call is executed on BFCL's own API classes
  (`bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils.execute_multi_turn_func_call`, the
  function BFCL's checker runs), turn after turn on the conversation's state, from the entry's
  `initial_config` (long_context's large states included): the output is what the API answered,
  errors included.
- **Arguments.** Ground-truth call strings are Python calls; they are parsed with `ast`
  (positional arguments are named after the document's parameters, in order).
- **Tasks.** Each user message is an instruction (there is one per turn, always a `user`
  message). The four categories re-use the same 200 scenarios (one initial state, the same or
  similar instructions): `scenario` is the number in the entry's id, and a held-out split that
  keeps every session of a scenario on one side is what "unseen tasks" means here.
- **Time.** `split(conversations, seed)` puts a seeded random two thirds of the scenarios first
  ("older", learnt on) and the rest last ("newer", scored on), every category of one scenario
  side by side, so a time split is a split by task. Scenarios are not shuffled by BFCL's id order
  (ids run suite by suite: a split by id would hold out suites, not tasks).

Run it alone for the counts: `.venv/bin/python bench/multiturn_data.py`.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_data import _category_file, _json_lines, _tool, bfcl_version, data_dir

CATEGORIES = ("multi_turn_base", "multi_turn_miss_param", "multi_turn_miss_func", "multi_turn_long_context")
SUITES = {  # API class -> its function document (bfcl_eval/constants/executable_backend_config.py)
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json", "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json",
}
MODEL_NAME = "toolscope_bench"


@dataclass
class Call:
    name: str
    arguments: dict[str, Any]
    output: str = ""


@dataclass
class Turn:
    message: str  # the user's instruction ("" when the turn has none)
    calls: list[Call] = field(default_factory=list)


@dataclass
class Conversation:
    id: str
    category: str
    scenario: int
    suites: list[str]
    turns: list[Turn]


def catalog() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The 128 tools ({name, description, input_schema}) in suite order, and each tool's suite."""
    directory = data_dir() / "multi_turn_func_doc"
    tools, suite_of = [], {}
    for suite, file_name in SUITES.items():
        for function in _json_lines(directory / file_name):
            tools.append(_tool(function))
            suite_of[function["name"]] = suite
    return tools, suite_of


def _parse_call(text: str, parameters: dict[str, list[str]]) -> Call:
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text!r}")
    name = node.func.id
    arguments = {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords if keyword.arg}
    for position, value in enumerate(node.args):
        arguments[parameters[name][position]] = ast.literal_eval(value)
    return Call(name, arguments)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=list))


def load(categories: tuple[str, ...] = CATEGORIES, *, limit: int | None = None) -> list[Conversation]:
    """Every conversation of `categories`, its calls executed on BFCL's API classes (a few
    seconds for the 800)."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    tools, _ = catalog()
    parameters = {tool["name"]: list(tool["input_schema"].get("properties", {})) for tool in tools}
    directory = data_dir()
    conversations = []
    for category in categories:
        entries = _json_lines(_category_file(directory, category))
        answers = {row["id"]: row["ground_truth"] for row in _json_lines(_category_file(directory / "possible_answer",
                                                                                        category))}
        for entry in entries[:limit]:
            turns = []
            for messages, truth in zip(entry["question"], answers[entry["id"]], strict=True):
                message = "\n".join(m["content"] for m in messages if m.get("role") == "user")
                calls = [_parse_call(text, parameters) for text in truth]
                if truth:
                    with contextlib.redirect_stdout(io.StringIO()):  # some API methods print
                        outputs, _ = multi_turn_utils.execute_multi_turn_func_call(
                            truth, entry["initial_config"], entry["involved_classes"], MODEL_NAME, entry["id"],
                            long_context="long_context" in category)
                    for call, output in zip(calls, outputs, strict=True):
                        call.arguments = _jsonable(call.arguments)
                        call.output = output
                turns.append(Turn(message, calls))
            conversations.append(Conversation(entry["id"], category, int(entry["id"].rsplit("_", 1)[1]),
                                              list(entry["involved_classes"]), turns))
    return conversations


def split(conversations: list[Conversation], *, seed: int = 25, held_out: float = 1 / 3,
          ) -> tuple[list[Conversation], list[Conversation]]:
    """(older, newer): a seeded random `1 - held_out` of the scenarios, then the rest; each side
    ordered scenario by scenario, categories in CATEGORIES order."""
    scenarios = sorted({conversation.scenario for conversation in conversations})
    random.Random(seed).shuffle(scenarios)
    cut = round(len(scenarios) * (1 - held_out))
    rank = {scenario: index for index, scenario in enumerate(scenarios)}
    ordered = sorted(conversations, key=lambda c: (rank[c.scenario], CATEGORIES.index(c.category)))
    older = [c for c in ordered if rank[c.scenario] < cut]
    return older, [c for c in ordered if rank[c.scenario] >= cut]


def main() -> None:
    tools, suite_of = catalog()
    conversations = load()
    calls = [call for c in conversations for turn in c.turns for call in turn.calls]
    print(f"bfcl-eval {bfcl_version()}: {len(conversations)} conversations, {len(tools)} tools in "
          f"{len(set(suite_of.values()))} suites")
    print(f"turns {sum(len(c.turns) for c in conversations)}, calls {len(calls)}, "
          f"requests {sum(len(turn.calls) + 1 for c in conversations for turn in c.turns)}, "
          f"errors {sum(call.output.startswith('Error') for call in calls)}")
    print("tools called:", len({call.name for call in calls}), Counter(call.name for call in calls).most_common(8))
    older, newer = split(conversations)
    print(f"split: {len(older)} older, {len(newer)} newer; shared scenarios: "
          f"{len({c.scenario for c in older} & {c.scenario for c in newer})}")


if __name__ == "__main__":
    main()
