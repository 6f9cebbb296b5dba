"""The tool-search benchmark's data: a tool catalog and user requests from bfcl-eval's own files.

Source: the data files inside the installed `bfcl-eval` wheel (`bfcl_eval/data/`, the Berkeley
Function Calling Leaderboard; the version is printed with every result). Only those JSON-lines
files are read: nothing of bfcl-eval is imported or executed, so bench/requirements.txt installs
it with `--no-deps`. Nothing is downloaded and nothing is cached: `load()` rebuilds everything in
well under a second.

Each BFCL entry is a user request (`question`), the functions the model was offered for it
(`function`, 1 to ~30 per request) and, in `possible_answer/`, the calls a correct answer makes
(`ground_truth`, a list of `{function name: {argument: [accepted values]}}`).

Choices, and why:

- Categories (CATEGORIES, in this order): the single-turn categories whose answer is a list of
  function calls: V1 `simple_python`, `simple_java`, `simple_javascript`, `multiple`,
  `parallel`, `parallel_multiple`, then the user-contributed V2 "live" ones `live_simple`,
  `live_multiple`, `live_parallel`, `live_parallel_multiple`. Left out: `irrelevance`,
  `live_irrelevance` and `live_relevance` (no ground-truth call, so no target), the multi-turn
  categories (the answer is a sequence of calls per turn that depends on the state built by
  earlier turns, over 9 shared API classes), `memory`, `web_search` (agentic: the answer is
  text) and `format_sensitivity` (a list of ids of other categories), and everything under
  `unused_datasets/`.
- Query text: the content of the request's user message. Every included entry has exactly one
  turn, holding one user message, preceded by a system message in 49 live entries; the system
  message is not part of the query. Queries are kept as written (a few live ones are not in
  English, e.g. Chinese).
- Targets: the distinct names of the functions called in the ground truth, in call order.
  A request is single-target when it calls one function (once, or several times in parallel:
  all of `simple_*`, `multiple`, `parallel`, `live_parallel`, most of the rest) and
  multi-target when it calls two or more different functions (only in `parallel_multiple`
  and `live_parallel_multiple`; 17 entries there call a single function and count as single).
  Every target is among the functions its request was offered.
- Catalog: every function offered by any included request (targets and BFCL's own
  distractors alike), one entry per name, in order of first appearance. Tool names must be
  unique in a real catalog (the OpenAI, Anthropic and MCP tool lists all key tools by name, and
  toolscope's SearchIndex keeps the first of equal names), but BFCL reuses names: ~2,550
  distinct (name, description, parameters) definitions carry ~1,440 names, because live
  entries re-send the same API with reworded descriptions or other enum lists, and a few
  generic names (`requests.get`, `get_current_weather`) stand for unrelated APIs. For such a
  name the catalog keeps the definition offered most often (ties: the first seen);
  `Dataset.stats` counts the requests whose target's offered description differs from the
  catalog's (their ranking sees a description written for another request).
- Names are kept exactly as in BFCL (`math.factorial`, `Events_3_FindEvents`), dots included;
  BFCL itself only swaps `.` for `_` when a provider's API forbids dots.
- input_schema: BFCL's parameter schema converted to JSON Schema the way bfcl-eval converts it
  for the OpenAI and Anthropic APIs (`bfcl_eval/constants/type_mappings.py`,
  GORILLA_TO_OPENAPI): `dict`/`HashMap` -> object, `float`/`double` -> number, `long` ->
  integer, `tuple`/`ArrayList`/`Array` -> array, `String`/`char` -> string, `Boolean` ->
  boolean, at every depth (properties and items); unlike bfcl-eval, `any` and unknown types get
  no `type` (JSON Schema's "anything") rather than "string", descriptions are not amended, and
  BFCL's non-standard `"optional": true` is dropped (`required` already says it).
- Order ("older" first, for the history time split): categories in the order above (V1 was
  released in February 2024, the live data in August 2024), and within a category the order
  of its file (BFCL's ids, `simple_python_0`, `simple_python_1`, ..., `live_multiple_0-0-0`,
  ...). `Query.seq` is the global position, `Query.position` the position within the file.

Run it alone to print the counts: `.venv/bin/python bench/search_data.py [--dump data.json]`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CATEGORIES = (
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
)

# bfcl_eval/constants/type_mappings.py GORILLA_TO_OPENAPI, except "any"/"Any" (no type here).
TYPE_MAP = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object", "tuple": "array",
    "byte": "integer", "short": "integer", "long": "integer", "double": "number", "char": "string",
    "ArrayList": "array", "Array": "array", "HashMap": "object", "Hashtable": "object", "Queue": "array",
    "Stack": "array", "String": "string", "Bigint": "integer", "Boolean": "boolean",
}
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


@dataclass(frozen=True)
class Query:
    seq: int                    # global position: categories in CATEGORIES order, then file order
    id: str                     # BFCL's id, e.g. "live_multiple_12-4-3"
    category: str
    position: int               # position within its category's file
    text: str                   # the user message
    targets: tuple[str, ...]    # distinct function names called by the ground truth, in call order
    offered: tuple[str, ...]    # names of the functions BFCL offered with this request

    @property
    def multi(self) -> bool:
        return len(self.targets) > 1


@dataclass
class Dataset:
    version: str
    catalog: list[dict[str, Any]]
    queries: list[Query]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def single(self) -> list[Query]:
        return [query for query in self.queries if not query.multi]

    @property
    def multi(self) -> list[Query]:
        return [query for query in self.queries if query.multi]


def data_dir() -> Path:
    """bfcl_eval/data of the installed wheel (found without importing bfcl_eval)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("bfcl-eval is not installed: .venv/bin/pip install --no-deps -r bench/requirements.txt "
                         "(see bench/requirements.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def bfcl_version() -> str:
    try:
        return importlib.metadata.version("bfcl-eval")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _json_lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _category_file(directory: Path, category: str) -> Path:
    """BFCL_v4_<category>.json (older wheels: BFCL_v3_<category>.json)."""
    for version in ("v4", "v3"):
        path = directory / f"BFCL_{version}_{category}.json"
        if path.exists():
            return path
    raise SystemExit(f"no BFCL file for category {category!r} in {directory}")


def to_json_schema(schema: Any) -> Any:
    """BFCL's parameter schema (`"type": "dict"`, `"float"`, Java types...) as JSON Schema."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "optional":
            continue
        if key == "type":
            mapped = TYPE_MAP.get(value) if isinstance(value, str) else None
            if mapped:
                out["type"] = mapped
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [to_json_schema(sub) for sub in value]
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = to_json_schema(value)
        elif key == "required" and not isinstance(value, list):
            continue  # a stray boolean "required" on a property is not JSON Schema
        else:
            out[key] = value
    return out


def _tool(function: dict[str, Any]) -> dict[str, Any]:
    parameters = to_json_schema(function.get("parameters") or {})
    parameters["type"] = "object"
    parameters.setdefault("properties", {})
    return {"name": function["name"], "description": function.get("description") or "",
            "input_schema": parameters}


def _user_text(turns: list[list[dict[str, Any]]]) -> str:
    """The last user message of the (single) turn; list content is joined by newlines."""
    for message in reversed(turns[0]):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content or "")
    return ""


def _definition_key(function: dict[str, Any]) -> str:
    return json.dumps([function["name"], function.get("description") or "", function.get("parameters")],
                      sort_keys=True)


def load(categories: Iterable[str] = CATEGORIES) -> Dataset:
    """The catalog and queries described in the module docstring."""
    directory = data_dir()
    queries: list[Query] = []
    definitions: dict[str, dict[str, Any]] = {}   # definition key -> BFCL function
    offered_count: Counter[str] = Counter()        # definition key -> requests offering it
    names_in_order: dict[str, list[str]] = {}      # name -> its definition keys, first seen first
    offered_definition: dict[tuple[str, str], str] = {}  # (query id, name) -> definition key
    turns_seen: Counter[int] = Counter()
    system_prompts = 0
    for category in categories:
        entries = _json_lines(_category_file(directory, category))
        answers = {answer["id"]: answer for answer in _json_lines(directory / "possible_answer" / _category_file(
            directory, category).name)}
        for position, entry in enumerate(entries):
            turns_seen[len(entry["question"])] += 1
            system_prompts += any(m.get("role") == "system" for m in entry["question"][0])
            for function in entry["function"]:
                key = _definition_key(function)
                if key not in definitions:
                    definitions[key] = function
                    names_in_order.setdefault(function["name"], []).append(key)
                offered_count[key] += 1
                offered_definition[(entry["id"], function["name"])] = key
            calls = answers[entry["id"]]["ground_truth"]
            targets = tuple(dict.fromkeys(next(iter(call)) for call in calls))
            offered = tuple(function["name"] for function in entry["function"])
            missing = set(targets) - set(offered)
            if missing:
                raise SystemExit(f"{entry['id']}: target(s) {sorted(missing)} not offered")
            queries.append(Query(seq=len(queries), id=entry["id"], category=category, position=position,
                                 text=_user_text(entry["question"]), targets=targets, offered=offered))
    chosen: dict[str, str] = {}  # name -> definition key kept in the catalog
    for name, keys in names_in_order.items():
        chosen[name] = max(keys, key=lambda k: (offered_count[k], -keys.index(k)))
    catalog = [_tool(definitions[chosen[name]]) for name in names_in_order]
    described = {name: definitions[key].get("description") or "" for name, key in chosen.items()}
    reworded = sum(
        any((definitions[offered_definition[(query.id, name)]].get("description") or "") != described[name]
            for name in query.targets)
        for query in queries)
    stats = {
        "bfcl_eval": bfcl_version(),
        "categories": list(categories),
        "definitions": len(definitions),
        "distinct_name_description": len({(f["name"], f.get("description") or "") for f in definitions.values()}),
        "tools": len(catalog),
        "names_with_several_definitions": sum(len(keys) > 1 for keys in names_in_order.values()),
        "names_with_several_descriptions": sum(
            len({definitions[k].get("description") or "" for k in keys}) > 1 for keys in names_in_order.values()),
        "queries": len(queries),
        "single_target": sum(not q.multi for q in queries),
        "multi_target": sum(q.multi for q in queries),
        "targets_per_multi": dict(sorted(Counter(len(q.targets) for q in queries if q.multi).items())),
        "queries_per_category": dict(Counter(q.category for q in queries)),
        "queries_with_system_prompt": system_prompts,
        "turns": dict(turns_seen),
        "queries_whose_target_description_differs_from_catalog": reworded,
        "distinct_targets": len({name for q in queries for name in q.targets}),
        "non_ascii_queries": sum(not q.text.isascii() for q in queries),
    }
    return Dataset(version=bfcl_version(), catalog=catalog, queries=queries, stats=stats)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, help="also write the catalog and queries to this JSON file")
    args = parser.parse_args(argv)
    dataset = load()
    json.dump(dataset.stats, sys.stdout, indent=2)
    print()
    if args.dump:
        args.dump.write_text(json.dumps({"stats": dataset.stats, "catalog": dataset.catalog,
                                         "queries": [asdict(q) for q in dataset.queries]}, indent=1))


if __name__ == "__main__":
    main()
