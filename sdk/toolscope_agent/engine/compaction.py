"""Compaction: a tool output cut down to a token budget, the original kept elsewhere.

The server builds compaction artifacts with these functions and the agent applies the same rules
before it sends an output to its model, so both must give the same text for the same input: every
function here is pure and deterministic, and token counting is injected (`count`), never imported.

Strategies (`STRATEGIES`):

- ``head_tail``: the start and the end of the output, ``head_share`` of the budget for the start,
  with one marker line between them saying how many lines (and about how many tokens) were left
  out and that the full output is retrievable;
- ``head``: the start, then the marker; ``tail``: the marker, then the end;
- ``json_prune``: the output parsed as JSON and pruned level by level (long arrays keep their first
  items plus a ``"… N more items"`` item, nested objects their first keys plus a ``"…"`` key,
  long strings their start plus ``"… [N more chars]"``, deep containers become a summary string)
  until its compact serialisation fits. The top-level keys are always kept. Text that is not JSON
  (or JSON that no level fits) is cut with ``head_tail`` and the result says so
  (``strategy="head_tail"``);
- ``dedupe_lines``: runs of a repeated line, or of a repeated block of up to eight lines, collapse
  to one copy and a ``[repeated N times]`` note (lines compare without trailing whitespace); when
  that is still over budget ``head_tail`` cuts the result (``strategy="dedupe_lines+head_tail"``),
  and when nothing repeats it cuts the original (``strategy="head_tail"``).

Retrieval: ``compact(..., artifact_id=artifact_id(text))`` names the original in what the model
reads, so an agent can ask for it back (the SDK's ``retrieve_tool_output`` tool). The id is a
content hash (`artifact_id`): the agent and the server compute it alike from the original alone,
without talking to each other. With an id, the marker line reads ``[… N lines (~T tokens)
omitted; full output: retrieve_tool_output(id="<id>")]``, and the results that have no marker
line (``json_prune``, ``dedupe_lines`` that fit) end with the line ``[compacted; full output:
retrieve_tool_output(id="<id>")]``, inside the budget; a ``json_prune`` result with that line is
no longer JSON as a whole. When the note makes a result miss the budget, ``head_tail`` cuts the
original instead (its marker names the id). Without an id, the marker says only that the full
output is retrievable.

Guarantees of `compact`: an output within budget comes back unchanged (``changed=False``);
otherwise ``tokens_after == count(text) <= max_tokens``, marker included. Cuts fall on line
boundaries; a line too long for the budget is cut by characters. ``head``/``head_tail`` results
begin with a prefix of the original and ``tail``/``head_tail`` results end with a suffix of it
(the marker line sits between them). When the budget cannot hold even the marker, the result is
the longest prefix of the marker that fits (possibly the empty string; only a counter that
charges tokens for the empty string can then exceed the budget).

Cost: `count` is the expensive call. Each search gallops (1, 3, 7, 15, … lines, then bisects), so
a cut makes O(log n) calls, all on candidates about the size of the budget; the only full-size
call is the one that measures the original. The "tokens omitted" figure in the marker is
therefore an estimate (tokens before minus tokens kept) rather than a count of the cut text.
"""

from __future__ import annotations

import hashlib
import json
import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from itertools import islice
from typing import Any

Counter = Callable[[str], int]

STRATEGIES: tuple[str, ...] = ("head_tail", "head", "tail", "json_prune", "dedupe_lines")

RETRIEVE_TOOL_NAME = "retrieve_tool_output"
"""The tool an agent offers its model for getting a compacted output's original back."""

ARTIFACT_ID_LENGTH = 24
"""Hex digits of an artifact id: 96 bits of SHA-256. Ids are looked up within one project, where
an accidental collision needs ~2**48 outputs; 24 hex digits cost ~14 tokens in the marker where a
full digest would cost ~45."""


def artifact_id(original: str) -> str:
    """The id of a compacted output's original: the first ARTIFACT_ID_LENGTH hex digits of the
    SHA-256 of its UTF-8 bytes (lone surrogates encoded as themselves, so any str has an id).

    It depends on the text alone, so the agent that compacted an output and the server that
    stored it compute the same id. It says nothing about which project holds the text: lookups
    are scoped to the asking key's project."""
    digest = hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:ARTIFACT_ID_LENGTH]


@dataclass(frozen=True)
class Compacted:
    text: str
    tokens_before: int
    tokens_after: int
    strategy: str  # what produced `text`: a member of STRATEGIES, or "dedupe_lines+head_tail"
    changed: bool
    artifact_id: str | None = None  # the id `text` names (only when changed and an id was given)


@dataclass(frozen=True)
class CompactionRule:
    tools: str  # fnmatch glob over tool names, case-sensitive: "bash*", "mcp_github_*"
    max_tokens: int
    strategy: str

    def __post_init__(self) -> None:
        _validate(self.strategy, self.max_tokens)


def compact(text: str, *, strategy: str, max_tokens: int, count: Counter, head_share: float = 0.6,
            tokens: int | None = None, artifact_id: str | None = None) -> Compacted:
    """`text` cut to at most `max_tokens` tokens (as measured by `count`) with `strategy`.

    `tokens`, when the caller has counted `text` already, must be `count(text)`: it saves the one
    full-size count. `artifact_id`, usually `artifact_id(text)`, is named in the result when
    `text` is cut (see the module docstring)."""
    _validate(strategy, max_tokens)
    if not 0.0 <= head_share <= 1.0:
        raise ValueError(f"head_share must be between 0 and 1, got {head_share!r}")
    before = count(text) if tokens is None else tokens
    if before <= max_tokens:
        return Compacted(text, before, before, strategy, changed=False)
    cut = _Cutter(text, before, max_tokens, count, head_share, artifact_id)
    if strategy == "json_prune":
        used, result = cut.json_prune()
    elif strategy == "dedupe_lines":
        used, result = cut.dedupe()
    else:
        used, result = strategy, cut.lines(text, before, head=strategy != "tail", tail=strategy != "head")
    return Compacted(result[0], before, result[1], used, changed=True, artifact_id=artifact_id)


@dataclass(frozen=True)
class _Cutter:
    """One compaction's inputs, shared by the strategies."""

    text: str
    before: int
    max_tokens: int
    count: Counter
    head_share: float
    artifact_id: str | None

    def lines(self, text: str, tokens: int, *, head: bool = True, tail: bool = True) -> tuple[str, int]:
        return _cut(text, tokens, self.max_tokens, self.count, head_share=self.head_share, head=head, tail=tail,
                    artifact_id=self.artifact_id)

    def with_note(self, text: str, tokens: int) -> tuple[str, int] | None:
        """`text` followed by the retrieval note (when there is an id), or None if over budget."""
        if self.artifact_id is None:
            return (text, tokens) if tokens <= self.max_tokens else None
        separator = "" if text.endswith("\n") else "\n"
        noted = text + separator + _note(self.artifact_id)
        noted_tokens = self.count(noted)
        return (noted, noted_tokens) if noted_tokens <= self.max_tokens else None

    def json_prune(self) -> tuple[str, tuple[str, int]]:
        reserve = self.count("\n" + _note(self.artifact_id)) if self.artifact_id is not None else 0
        pruned = _json_prune(self.text, self.max_tokens - reserve, self.count) if reserve < self.max_tokens else None
        noted = self.with_note(*pruned) if pruned is not None else None
        if noted is None:
            return "head_tail", self.lines(self.text, self.before)
        return "json_prune", noted

    def dedupe(self) -> tuple[str, tuple[str, int]]:
        deduped = dedupe_lines(self.text)
        if deduped == self.text:
            return "head_tail", self.lines(self.text, self.before)
        tokens = self.count(deduped)
        noted = self.with_note(deduped, tokens)
        if noted is not None:
            return "dedupe_lines", noted
        return "dedupe_lines+head_tail", self.lines(deduped, tokens)


def rule_for(tool_name: str, rules: Sequence[CompactionRule]) -> CompactionRule | None:
    """The first rule whose glob matches `tool_name` (case-sensitive), or None."""
    for rule in rules:
        if fnmatchcase(tool_name, rule.tools):
            return rule
    return None


def rules_from_policy(policy: Mapping[str, Any]) -> list[CompactionRule]:
    """The compaction rules of a policy document (``policy["outputs"]["compaction"]``), in order.

    Also accepts the ``outputs`` section on its own (a mapping with a ``compaction`` key and no
    ``outputs`` key), which is what the server's processing holds. Missing sections give ``[]``;
    a malformed rule raises ValueError (published policies are validated, so that is a bug).
    """
    outputs = policy.get("outputs") if "outputs" in policy else policy
    if not isinstance(outputs, Mapping):
        return []
    entries = outputs.get("compaction") or []
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        raise ValueError("outputs.compaction must be a list of rules")
    rules = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise ValueError(f"compaction rule {index} is not an object")
        tools, max_tokens, strategy = entry.get("tools"), entry.get("max_tokens"), entry.get("strategy")
        if not isinstance(tools, str) or not isinstance(strategy, str) or not isinstance(max_tokens, int):
            raise ValueError(f"compaction rule {index} needs tools (str), max_tokens (int) and strategy (str)")
        rules.append(CompactionRule(tools=tools, max_tokens=max_tokens, strategy=strategy))
    return rules


def _validate(strategy: str, max_tokens: int) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown compaction strategy {strategy!r}; expected one of: {', '.join(STRATEGIES)}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")


# --- searching -------------------------------------------------------------------------------


def _largest(measure: Callable[[int], int], limit: int, hi: int, zero: int, guess: int = 0) -> tuple[int, int]:
    """The largest k in [0, hi] with measure(k) <= limit, and its measure, given measure(0) = zero
    (which fits). Assumes measure grows with k; whatever it does, the k returned was measured and
    fits.

    With a `guess` of the answer, probes it first and gallops down from it (guess, guess-1,
    guess-3, guess-7, …) until something fits; then, as without a guess, gallops up (1, 3, 7, 15,
    … past the last fit) and bisects. A good guess costs two or three calls; a bad one O(log k).
    """
    lo, lo_tokens = 0, zero
    start, back = min(guess, hi), 0
    while start - back > lo:
        k = start - back
        tokens = measure(k)
        if tokens <= limit:
            lo, lo_tokens = k, tokens
            break
        hi, back = k - 1, back * 2 + 1
    step = 1
    while lo < hi:
        k = min(lo + step, hi)
        tokens = measure(k)
        if tokens > limit:
            hi = k - 1
            break
        lo, lo_tokens, step = k, tokens, step * 2
    while lo < hi:
        k = (lo + hi + 1) // 2
        tokens = measure(k)
        if tokens <= limit:
            lo, lo_tokens = k, tokens
        else:
            hi = k - 1
    return lo, lo_tokens


# --- head / tail cuts ------------------------------------------------------------------------


def _line_bounds(text: str) -> list[int]:
    """0, the end of every line (after its newline), and len(text): line i is bounds[i]:bounds[i+1]."""
    bounds = [0]
    pos = text.find("\n")
    while pos != -1:
        bounds.append(pos + 1)
        pos = text.find("\n", pos + 1)
    if bounds[-1] != len(text):
        bounds.append(len(text))
    return bounds


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"  # "1 more item", "2 more items"


def _retrieval(artifact_id: str | None) -> str:
    return f'full output: {RETRIEVE_TOOL_NAME}(id="{artifact_id}")' if artifact_id else "full output retrievable"


def _marker(lines: int, tokens: int, artifact_id: str | None = None) -> str:
    return f"[… {_plural(lines, 'line')} (~{tokens} tokens) omitted; {_retrieval(artifact_id)}]"


def _note(artifact_id: str) -> str:
    """The last line of a result that has no marker line (json_prune, dedupe_lines)."""
    return f"[compacted; {_retrieval(artifact_id)}]"


def _assemble(text: str, head_end: int, tail_start: int, marker: str) -> str:
    head, tail = text[:head_end], text[tail_start:]
    parts = [head, "" if not head or head.endswith("\n") else "\n", marker]
    if tail:
        parts += ["\n", tail]
    return "".join(parts)


def _omitted_lines(bounds: list[int], head_end: int, tail_start: int) -> int:
    """Lines of the original that are not kept whole (head_end < tail_start)."""
    first = bisect_right(bounds, head_end) - 1
    last = bisect_right(bounds, tail_start - 1) - 1
    return last - first + 1


def _cut(text: str, before: int, max_tokens: int, count: Counter, *, head_share: float, head: bool,
         tail: bool, artifact_id: str | None = None) -> tuple[str, int]:
    """The longest head and/or tail of `text` that fit with a marker line between them."""
    bounds = _line_bounds(text)
    template = _marker(len(bounds) - 1, before, artifact_id)  # the widest marker this text can get
    template_tokens = count(template)
    overflow = 0
    # The final marker has smaller numbers than the template, so it almost always costs no more;
    # a counter for which it does gets the overshoot taken off the budget and another try.
    for _ in range(3):
        plan = _plan(text, bounds, template, template_tokens, max_tokens - overflow, count,
                     head_share=head_share, head=head, tail=tail, rate=before / max(1, len(text)))
        if plan is None:
            break
        head_end, tail_start, kept_tokens = plan
        omitted = min(before, max(0, before - (kept_tokens - template_tokens)))
        marker = _marker(_omitted_lines(bounds, head_end, tail_start), omitted, artifact_id)
        result = _assemble(text, head_end, tail_start, marker)
        tokens = count(result)
        if tokens <= max_tokens:
            return result, tokens
        overflow += tokens - max_tokens
    return _marker_only(_marker(len(bounds) - 1, before, artifact_id), max_tokens, count)


def _plan(text: str, bounds: list[int], template: str, template_tokens: int, budget: int, count: Counter, *,
          head_share: float, head: bool, tail: bool, rate: float) -> tuple[int, int, int] | None:
    """(head_end, tail_start, tokens of the text assembled with `template`) or None when the
    marker alone does not fit. Something is always left out: head_end < tail_start.

    Each line search starts from a guess, the line where the text's average of `rate` tokens
    per character would reach the limit: only the candidates next to it get counted."""
    size = len(text)
    lines = len(bounds) - 1
    if template_tokens > budget or lines == 0:
        return None
    head_end, kept_tokens = 0, template_tokens
    if head:
        share = head_share if tail else 1.0  # with no tail the head gets the whole budget
        head_limit = template_tokens + math.floor((budget - template_tokens) * share)

        def head_lines(k: int) -> int:
            return count(_assemble(text, bounds[k], size, template))

        guess = bisect_right(bounds, (head_limit - template_tokens) / rate) - 1 if rate else 0
        whole, kept_tokens = _largest(head_lines, head_limit, lines - 1, template_tokens, guess)
        head_end = bounds[whole]
        if whole == 0:  # not even the first line fits: cut it by characters

            def head_chars(k: int) -> int:
                return count(_assemble(text, k, size, template))

            head_end, kept_tokens = _largest(head_chars, head_limit, bounds[1] - 1, template_tokens)
    tail_start = size
    if tail:
        kept_lines = bisect_right(bounds, head_end) - 1  # lines wholly inside the head

        def tail_lines(k: int) -> int:
            return count(_assemble(text, head_end, bounds[lines - k], template))

        guess = lines - bisect_left(bounds, size - (budget - kept_tokens) / rate) if rate else 0
        whole, kept_tokens = _largest(tail_lines, budget, lines - kept_lines - 1, kept_tokens, guess)
        tail_start = bounds[lines - whole]
        if whole == 0:  # not even the last line fits: cut it by characters

            def tail_chars(k: int) -> int:
                return count(_assemble(text, head_end, size - k, template))

            most = size - max(head_end, bounds[lines - 1]) - 1
            if most > 0:
                taken, kept_tokens = _largest(tail_chars, budget, most, kept_tokens)
                tail_start = size - taken
    return head_end, tail_start, kept_tokens


def _marker_only(marker: str, max_tokens: int, count: Counter) -> tuple[str, int]:
    tokens = count(marker)
    if tokens <= max_tokens:
        return marker, tokens

    def prefix(k: int) -> int:
        return count(marker[:k])

    taken, tokens = _largest(prefix, max_tokens, len(marker) - 1, count(""))
    return marker[:taken], tokens


# --- json_prune ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Level:
    items: int  # array items kept
    keys: int  # keys kept in nested objects (top-level keys are always kept)
    chars: int  # characters kept of a string
    depth: int  # containers this deep (the top level is 0) become a summary string


_UNLIMITED = 1 << 62
# From the document re-serialised compactly (level 0 prunes nothing) to every top-level value a
# scalar or a summary; each level is at least as tight as the one before in every respect.
_LEVELS: tuple[_Level, ...] = (
    _Level(_UNLIMITED, _UNLIMITED, _UNLIMITED, _UNLIMITED),
    _Level(200, 200, 4000, 32),
    _Level(100, 100, 2000, 16),
    _Level(50, 50, 1000, 12),
    _Level(30, 30, 500, 10),
    _Level(20, 20, 300, 8),
    _Level(10, 12, 200, 6),
    _Level(6, 8, 120, 5),
    _Level(4, 6, 80, 4),
    _Level(3, 4, 50, 3),
    _Level(2, 3, 30, 3),
    _Level(1, 2, 20, 2),
    _Level(1, 1, 10, 2),
    _Level(0, 0, 0, 1),
)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_prune(text: str, max_tokens: int, count: Counter) -> tuple[str, int] | None:
    """The least pruned compact JSON that fits, or None (not JSON, or not even the tightest fits)."""
    try:
        document = json.loads(text, parse_constant=_reject_constant)
        pruner = _Pruner(document)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than this stack allows
        return None

    def measure(index: int) -> tuple[str, int]:
        pruned = pruner.prune(document, _LEVELS[index], 0) if index else document  # level 0 prunes nothing
        try:
            serialized = json.dumps(pruned, ensure_ascii=False, separators=(",", ":"))
        except RecursionError:  # only the unpruned document can be this deep
            return "", max_tokens + 1
        return serialized, count(serialized)

    # The least pruned level that fits: tighter levels are (about) smaller, so bisect, tightest first.
    best = measure(len(_LEVELS) - 1)
    if best[1] > max_tokens:
        return None
    lo, hi = 0, len(_LEVELS) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        candidate = measure(mid)
        if candidate[1] <= max_tokens:
            best, hi = candidate, mid
        else:
            lo = mid + 1
    return best


class _Pruner:
    """Prunes one parsed document. Every cut replaces something larger than itself: the compact
    size of each container is measured once up front, and a summary or a "more items" marker is
    used only where it is shorter than what it stands for, so pruning never grows the text."""

    def __init__(self, document: Any) -> None:
        self._sizes: dict[int, int] = {}  # id() of each container -> its compact JSON length (about)
        self._size(document)

    def _size(self, value: Any) -> int:
        if isinstance(value, str):
            return len(value) + 2
        if isinstance(value, list):  # loops rather than sum(generator): one stack frame per level
            size = 2 if not value else 1
            for item in value:
                size += self._size(item) + 1
        elif isinstance(value, dict):
            size = 2 if not value else 1
            for key, item in value.items():
                size += len(key) + 4 + self._size(item)
        elif value is None or value is True:
            return 4
        elif value is False:
            return 5
        else:  # a number; json writes ints with str() and floats with repr()
            return len(repr(value))
        self._sizes[id(value)] = size
        return size

    def _known(self, value: Any) -> int:
        return self._sizes[id(value)] if isinstance(value, list | dict) else self._size(value)

    def prune(self, value: Any, level: _Level, depth: int) -> Any:
        if isinstance(value, str):
            return _prune_string(value, level.chars)
        if isinstance(value, list) and value:
            return self._prune_list(value, level, depth)
        if isinstance(value, dict) and value:
            return self._prune_dict(value, level, depth)
        return value

    def _prune_list(self, value: list[Any], level: _Level, depth: int) -> Any:
        if depth and depth >= level.depth:
            summary = f"[… {_plural(len(value), 'item')}]"
            if len(summary) + 2 < self._sizes[id(value)]:
                return summary
        keep = level.items
        if keep < len(value):
            marker = f"… {_plural(len(value) - keep, 'more item')}"
            if len(marker) + 3 >= sum(self._known(item) + 1 for item in value[keep:]):
                keep = len(value)  # the marker would be longer than the items it replaces
        kept: list[Any] = [self.prune(item, level, depth + 1) for item in value[:keep]]
        if keep < len(value):
            kept.append(marker)
        return kept

    def _prune_dict(self, value: dict[str, Any], level: _Level, depth: int) -> Any:
        if depth and depth >= level.depth:
            summary = f"{{… {_plural(len(value), 'key')}}}"
            if len(summary) + 2 < self._sizes[id(value)]:
                return summary
        keep = level.keys if depth else len(value)  # the top-level keys always stay
        extra = _free_key(value)
        note = _plural(len(value) - keep, "more key")
        if keep < len(value) and len(extra) + len(note) + 6 >= sum(
                len(key) + 4 + self._known(item) for key, item in islice(value.items(), keep, None)):
            keep = len(value)
        pruned = {key: self.prune(item, level, depth + 1) for key, item in islice(value.items(), keep)}
        if keep < len(value):
            pruned[extra] = note
        return pruned


def _free_key(mapping: dict[str, Any]) -> str:
    key = "…"
    while key in mapping:
        key += "…"
    return key


def _prune_string(value: str, chars: int) -> str:
    if len(value) <= chars:
        return value
    cut = f"{value[:chars]}… [{len(value) - chars} more chars]"
    return cut if len(cut) < len(value) else value


# --- dedupe_lines ----------------------------------------------------------------------------

_MAX_BLOCK = 8  # longest block of lines whose repeats are collapsed


def dedupe_lines(text: str) -> str:
    """`text` with consecutive repeats collapsed.

    A line repeated N times in a row becomes ``line [repeated N times]`` (blank lines:
    ``[blank line] [repeated N times]``); a block of 2 to 8 lines repeated N times in a row is
    kept once, followed by ``[the K lines above repeated N times]``. Lines compare (and collapsed
    lines are written) without trailing whitespace. A run is collapsed only when that makes it
    shorter (in characters); at each line the block length that saves the most wins, the shorter
    on ties. Deterministic and independent of any token counter."""
    pieces = text.split("\n")
    ends = [True] * (len(pieces) - 1) + [False]  # whether each piece had a newline after it
    if pieces[-1] == "" and len(pieces) > 1:  # the text ends with a newline: no empty last line
        pieces.pop()
        ends.pop()
    keys = [piece.rstrip() for piece in pieces]
    out: list[str] = []
    i, n = 0, len(pieces)
    while i < n:
        best_saving, best_block, best_runs, best_text = 0, 0, 0, ""
        for block in range(1, min(_MAX_BLOCK, (n - i) // 2) + 1):
            if keys[i + block] != keys[i]:  # cannot repeat at this length: skip the slice compare
                continue
            runs = 1
            while i + (runs + 1) * block <= n and keys[i + runs * block:i + (runs + 1) * block] == keys[i:i + block]:
                runs += 1
            if runs < 2:
                continue
            end = "\n" if ends[i + runs * block - 1] else ""
            if block == 1:
                line = keys[i] + " " if keys[i] else "[blank line] "
                collapsed = f"{line}[repeated {runs} times]{end}"
            else:
                collapsed = "".join(key + "\n" for key in keys[i:i + block]) + (
                    f"[the {block} lines above repeated {runs} times]{end}")
            original = sum(len(piece) + 1 for piece in pieces[i:i + runs * block]) - (0 if end else 1)
            saving = original - len(collapsed)
            if saving > best_saving:
                best_saving, best_block, best_runs, best_text = saving, block, runs, collapsed
        if best_saving > 0:
            out.append(best_text)
            i += best_block * best_runs
        else:
            out.append(pieces[i] + ("\n" if ends[i] else ""))
            i += 1
    return "".join(out)
