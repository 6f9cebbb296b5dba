"""A static check for regexes that can backtrack catastrophically.

Context-rule regexes run on every task message, in the server and in every agent. The server
matches them with RE2 (linear time); an agent without RE2 uses Python's backtracking `re` on the
start of the message (toolscope_agent.engine.selection). A pattern such as `(a+)+` takes
exponential time on a message like "aaaa…b", so publishing refuses the shapes that cause it.
The check reads the parse tree of `re._parser` (the same parser `re.compile` uses) and flags,
inside any group repeated more than once:

- another repeat (`(a+)+`, `(a*)*`, `(.*a){20}`): nested quantifiers. Small bounded ones, whose
  ways to split a text stay under `_MAX_SPLITS` (`(\\d{1,3}\\.){3}`), pass;
- a body that can match the empty string (`(a?)+`, `(|a)+`);
- an alternation whose branches can start with the same character (`(a|a)+`, `(a|ab)+`).

Anywhere in the pattern, it also flags two unbounded repeats side by side that can match the same
character (`\\w*\\w*`, `.*.*`, `a*a*`, `.+\\d+`), looking through groups and past items that can
match nothing (`a*-?a*`): each pair multiplies the ways to split a text, so `\\w*\\w*\\w*\\w*\\w*!` is
O(n^6) on a message without "!". Bounded repeats with fewer than `_LOOSE_SPAN` choices pass.

Before any of that, the pattern must compile with RE2 too: the server matches rules with RE2
(linear time, so these shapes only hurt agents without it), and RE2 refuses back-references,
lookarounds, atomic groups and possessive repeats.

It errs on the side of refusing: a nested repeat that a delimiter would keep linear, such as
`(?:x(a+)b)*`, is refused too. Atomic groups and possessive repeats never backtrack into
themselves, so repeats inside them are not counted as nested.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from re import _compiler as sre_compile  # private, like the two below
from re import _constants as sre  # private, but the module `re.compile` itself uses since 3.11
from re import _parser as sre_parse
from typing import Any

import re2

MAX_PATTERN_LENGTH = 200
_BACKTRACKING_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT)
_REPEATS = (*_BACKTRACKING_REPEATS, sre.POSSESSIVE_REPEAT)
_ZERO_WIDTH = (sre.AT, sre.ASSERT, sre.ASSERT_NOT)
# Bounded nested repeats pass while inner_max ** outer_max (the ways to split a run) stays below.
_MAX_SPLITS = 1000
# A range wider than this counts as "any character" when comparing first characters.
_MAX_RANGE = 256
# Side by side, repeats count when unbounded or with at least this many choices of length.
_LOOSE_SPAN = 32
# Characters tried when asking whether two repeats can match the same one, beside ASCII and the
# characters the two patterns name: Unicode letters, digits and spaces that \\w, \\d, \\s match.
_PROBES = "\u00a0\u00b2\u00df\u00e9\u0130\u0416\u0663\u1680\u2028\u212a\u3000\u4e2d\U0001f600"
_SINGLE_CHAR = (sre.LITERAL, sre.NOT_LITERAL, sre.IN, sre.ANY)

NESTED = "nested quantifiers (like (a+)+) can take exponential time; repeat a single item instead"
EMPTY_BODY = "a repeated group that can match nothing (like (a?)+) can take exponential time"
OVERLAP = (
    "a repeated alternation whose branches can match the same text (like (a|ab)+) can take "
    "exponential time; make the branches start differently"
)
ADJACENT = (
    "two repeats side by side that can match the same characters (like \\w*\\w* or .*.*) can take "
    "polynomial time; merge them into one repeat"
)
RE2_REFUSED = (
    "RE2, which matches rules, cannot compile it ({reason}); back-references, lookarounds, atomic "
    "groups and possessive repeats are not supported"
)

Node = tuple[Any, Any]
# The characters a match can start with (None: any character), and whether it can be empty.
First = tuple[frozenset[str] | None, bool]


def regex_problem(pattern: str, *, flags: int = 0) -> str | None:
    """Why `pattern` cannot be published (too long, invalid, pathological), or None."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"longer than {MAX_PATTERN_LENGTH} characters"
    try:
        re.compile(pattern, flags)
    except re.error as exc:
        return f"not a valid regular expression: {exc}"
    if reason := _re2_refusal(pattern, flags):
        return RE2_REFUSED.format(reason=reason)
    tree = sre_parse.parse(pattern, flags)
    for op, av in _walk(list(tree)):
        if op in _BACKTRACKING_REPEATS and av[1] > 1 and (problem := _repeat_problem(av[1], list(av[2]))):
            return problem
    sequences = [list(tree), *(child for op, av in _walk(list(tree)) for child in _children(op, av))]
    if any(_adjacent_overlap(items, tree.state) for items in sequences):
        return ADJACENT
    return None


def _re2_refusal(pattern: str, flags: int) -> str | None:
    """RE2's reason for refusing `pattern` (with `re`'s IGNORECASE flag carried over), or None."""
    options = re2.Options()
    options.case_sensitive = not flags & re.IGNORECASE
    options.log_errors = False
    try:
        re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "refused"
        return reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
    return None


def _children(op: Any, av: Any) -> list[list[Node]]:
    """The item sequences directly inside one node."""
    if op in _REPEATS:
        return [list(av[2])]
    if op is sre.SUBPATTERN:
        return [list(av[3])]
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return [list(av[1])]
    if op is sre.ATOMIC_GROUP:
        return [list(av)]
    if op is sre.BRANCH:
        return [list(alt) for alt in av[1]]
    if op is sre.GROUPREF_EXISTS:
        return [list(seq) for seq in av[1:] if seq is not None]
    return []


def _walk(items: list[Node], *, into_atomic: bool = True) -> Iterator[Node]:
    for op, av in items:
        yield op, av
        if not into_atomic and op in (sre.ATOMIC_GROUP, sre.POSSESSIVE_REPEAT):
            continue
        for child in _children(op, av):
            yield from _walk(child, into_atomic=into_atomic)


def _repeat_problem(outer_max: int, body: list[Node]) -> str | None:
    inner = list(_walk(body, into_atomic=False))
    if any(op in _BACKTRACKING_REPEATS and _explodes(outer_max, av[1]) for op, av in inner):
        return NESTED
    if _first(body)[1]:
        return EMPTY_BODY
    for op, av in inner:
        if op is sre.BRANCH and _branches_overlap([_first(list(alt)) for alt in av[1]]):
            return OVERLAP
    return None


def _explodes(outer_max: int, inner_max: int) -> bool:
    if inner_max <= 1:
        return False
    if sre.MAXREPEAT in (outer_max, inner_max):
        return True
    return outer_max * math.log(inner_max) > math.log(_MAX_SPLITS)


def _branches_overlap(firsts: list[First]) -> bool:
    for i, (chars, empty) in enumerate(firsts):
        if empty or chars is None:
            return True
        if any(other is None or chars & other for other, _ in firsts[i + 1 :]):
            return True
    return False


def _first(items: list[Node]) -> First:
    """What a sequence of items can start with; case is folded, which only ever refuses more."""
    chars: set[str] = set()
    for op, av in items:
        item_chars, empty = _first_of(op, av)
        if item_chars is None:
            return None, False
        chars |= item_chars
        if not empty:
            return frozenset(chars), False
    return frozenset(chars), True


def _first_of(op: Any, av: Any) -> First:
    if op is sre.LITERAL:
        return frozenset({chr(av).lower()}), False
    if op is sre.IN:
        return _class_first(av), False
    if op in _ZERO_WIDTH:
        return frozenset(), True
    if op in _REPEATS:
        chars, empty = _first(list(av[2]))
        return chars, empty or av[0] == 0
    if op in (sre.SUBPATTERN, sre.ATOMIC_GROUP, sre.BRANCH, sre.GROUPREF_EXISTS):
        optional = op is sre.GROUPREF_EXISTS and av[2] is None  # (?(1)yes) without a "no" branch
        return _union([_first(seq) for seq in _children(op, av)], optional=optional)
    return None, True  # any character, a back-reference, ...: assume the worst


def _union(firsts: list[First], *, optional: bool = False) -> First:
    chars: set[str] = set()
    empty = optional
    for item_chars, item_empty in firsts:
        if item_chars is None:
            return None, True
        chars |= item_chars
        empty = empty or item_empty
    return frozenset(chars), empty


def _class_first(items: list[Node]) -> frozenset[str] | None:
    chars: set[str] = set()
    for op, av in items:
        if op is sre.LITERAL:
            chars.add(chr(av).lower())
        elif op is sre.RANGE and av[1] - av[0] < _MAX_RANGE:
            chars.update(chr(code).lower() for code in range(av[0], av[1] + 1))
        else:  # categories (\w, \d), negation, wide ranges
            return None
    return frozenset(chars)


# --- Repeats side by side -----------------------------------------------------------------------


def _adjacent_overlap(items: list[Node], state: Any) -> bool:
    """Whether a loose repeat can follow another loose repeat that matches a character it matches."""
    before: list[Node] = []  # loose repeats the current item can directly follow
    for op, av in items:
        for repeat in _edge_repeats(op, av, last=False):
            if any(_repeats_overlap(earlier, repeat, state) for earlier in before):
                return True
        ends = _edge_repeats(op, av, last=True)
        before = [*before, *ends] if _can_be_empty(op, av) else ends
    return False


def _is_loose(op: Any, av: Any) -> bool:
    if op not in _BACKTRACKING_REPEATS or av[0] == av[1]:
        return False
    return av[1] == sre.MAXREPEAT or av[1] - av[0] >= _LOOSE_SPAN


def _edge_repeats(op: Any, av: Any, *, last: bool) -> list[Node]:
    """The loose repeats an item can begin (or end) with, looking into groups and alternations."""
    if _is_loose(op, av):
        return [(op, av)]
    if op not in (sre.SUBPATTERN, sre.BRANCH):
        return []
    found: list[Node] = []
    for sequence in _children(op, av):
        for item in reversed(sequence) if last else sequence:
            found.extend(_edge_repeats(*item, last=last))
            if not _can_be_empty(*item):
                break
    return found


def _can_be_empty(op: Any, av: Any) -> bool:
    if op in _SINGLE_CHAR:
        return False
    if op in _REPEATS:
        return av[0] == 0 or all(_can_be_empty(*item) for item in av[2])
    if op in (sre.SUBPATTERN, sre.ATOMIC_GROUP):
        return all(_can_be_empty(*item) for item in _children(op, av)[0])
    if op is sre.BRANCH:
        return any(all(_can_be_empty(*item) for item in alt) for alt in _children(op, av))
    return True  # assertions, anchors, back-references, conditionals: assume nothing is consumed


def _repeats_overlap(first: Node, second: Node, state: Any) -> bool:
    one, other = _char_test(first, state), _char_test(second, state)
    probes = {*map(chr, range(128)), *_PROBES, *_named_chars(first), *_named_chars(second)}
    return any(one(char) and other(char) for char in probes)


def _char_test(repeat: Node, state: Any) -> Callable[[str], bool]:
    """Whether one character can start an iteration of the repeat: exact for a single-character
    body (compiled by `re` itself, flags included), by first characters for a longer one."""
    body = list(repeat[1][2])
    if len(body) == 1 and body[0][0] in _SINGLE_CHAR:
        compiled = sre_compile.compile(sre_parse.SubPattern(state, body), state.flags)
        return lambda char: compiled.fullmatch(char) is not None
    chars, _ = _first(body)
    if chars is None:
        return lambda char: True
    return lambda char: char.lower() in chars


def _named_chars(repeat: Node) -> set[str]:
    """Literal characters and range ends inside a repeat's body: where two classes can meet."""
    chars: set[str] = set()
    for op, av in _walk(list(repeat[1][2])):
        if op in (sre.LITERAL, sre.NOT_LITERAL):
            chars.add(chr(av))
        elif op is sre.RANGE:
            chars.update((chr(av[0]), chr(av[1])))
        elif op is sre.IN:
            chars.update(_named_chars((sre.MAX_REPEAT, (1, 1, av))))
    return chars
