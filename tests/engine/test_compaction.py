"""Compaction of tool outputs to a token budget (engine/compaction.py).

Counting is injected, so every property runs with several counters: whitespace words, chars/4,
a punctuation-splitting counter that is not additive over concatenation (like BPE) and one that
is not even monotone.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toolscope_agent.engine.compaction import (
    STRATEGIES,
    Compacted,
    CompactionRule,
    artifact_id,
    compact,
    dedupe_lines,
    rule_for,
    rules_from_policy,
)


def words(text: str) -> int:
    return len(text.split())


def quarter_chars(text: str) -> int:
    return (len(text) + 3) // 4


def pieces(text: str) -> int:
    return len(re.findall(r"\w+|[^\w\s]", text))


def jittery(text: str) -> int:
    """Not monotone at all: a longer text can cost fewer tokens. The budget must hold anyway."""
    return len(text) // 3 + zlib.crc32(text.encode("utf-8", "surrogatepass")) % 4


COUNTERS = [words, quarter_chars, pieces, jittery]
MARKER = re.compile(r"\[… \d+ lines? \(~\d+ tokens\) omitted; full output retrievable\]")

line_text = st.lists(st.text(alphabet="ab xyz\t{}\":,", max_size=30), max_size=40).map("\n".join)
any_text = st.one_of(
    line_text,
    st.text(max_size=600),
    st.builds(lambda a, b, c: a + b + c, line_text, st.text(alphabet="qw ", min_size=200, max_size=2000), line_text),
)
budgets = st.integers(min_value=1, max_value=120)


def head_and_tail(result: str) -> tuple[str, str] | None:
    """The kept head and tail around the marker, or None when there is no whole marker."""
    found = MARKER.search(result)
    if found is None:
        return None
    head, tail = result[:found.start()], result[found.end():]
    if tail:
        assert tail.startswith("\n")
        tail = tail[1:]
    return head, tail


def assert_prefix(original: str, head: str) -> None:
    # A head cut inside a line gets a newline of its own before the marker.
    assert original.startswith(head) or (head.endswith("\n") and original.startswith(head[:-1]))


def assert_marker_only(result: str) -> None:
    assert result == "" or result.startswith("[…") or "[…".startswith(result)


# --- properties ----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_text, budget=budgets, strategy=st.sampled_from(STRATEGIES), count=st.sampled_from(COUNTERS))
def test_the_result_never_exceeds_the_budget(text, budget, strategy, count):
    result = compact(text, strategy=strategy, max_tokens=budget, count=count)
    assert result.tokens_before == count(text)
    assert result.tokens_after == count(result.text) <= budget
    assert result.changed == (result.tokens_before > budget)
    assert compact(text, strategy=strategy, max_tokens=budget, count=count) == result  # deterministic


@settings(max_examples=200, deadline=None)
@given(text=any_text, strategy=st.sampled_from(STRATEGIES), count=st.sampled_from(COUNTERS))
def test_text_within_budget_comes_back_unchanged(text, strategy, count):
    budget = max(1, count(text))
    assert compact(text, strategy=strategy, max_tokens=budget, count=count) == Compacted(
        text, count(text), count(text), strategy, changed=False
    )


@settings(max_examples=300, deadline=None)
@given(text=any_text, budget=budgets, count=st.sampled_from(COUNTERS),
       head_share=st.floats(min_value=0, max_value=1))
def test_head_tail_keeps_a_prefix_and_a_suffix(text, budget, count, head_share):
    result = compact(text, strategy="head_tail", max_tokens=budget, count=count, head_share=head_share)
    if not result.changed:
        return
    parts = head_and_tail(result.text)
    if parts is None:  # the budget cannot hold the marker
        assert_marker_only(result.text)
        return
    head, tail = parts
    assert_prefix(text, head)
    assert text.endswith(tail)
    assert len(head) + len(tail) < len(text)  # something was left out


@settings(max_examples=200, deadline=None)
@given(text=any_text, budget=budgets, count=st.sampled_from(COUNTERS))
def test_head_keeps_a_prefix_and_tail_a_suffix(text, budget, count):
    head_only = compact(text, strategy="head", max_tokens=budget, count=count)
    tail_only = compact(text, strategy="tail", max_tokens=budget, count=count)
    if not head_only.changed:
        return
    for result in (head_only, tail_only):
        if head_and_tail(result.text) is None:
            assert_marker_only(result.text)
    if (parts := head_and_tail(head_only.text)) is not None:
        assert parts[1] == ""
        assert_prefix(text, parts[0])
    if (parts := head_and_tail(tail_only.text)) is not None:
        assert parts[0] == ""
        assert text.endswith(parts[1])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=300),
    lambda children: st.lists(children, max_size=30) | st.dictionaries(st.text(max_size=12), children, max_size=8),
    max_leaves=60,
)
json_documents = st.one_of(
    st.dictionaries(st.text(alphabet="abcdefgh_", min_size=1, max_size=8), json_values, min_size=1, max_size=4),
    st.lists(json_values, min_size=1, max_size=60),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=json_documents, budget=st.integers(min_value=50, max_value=400),
       count=st.sampled_from([quarter_chars, words, pieces]), indent=st.sampled_from([None, 2]))
def test_json_prune_keeps_the_top_level_shape(document, budget, count, indent):
    text = json.dumps(document, indent=indent, ensure_ascii=False)
    result = compact(text, strategy="json_prune", max_tokens=budget, count=count)
    if not result.changed:
        return
    assert result.strategy == "json_prune"
    pruned = json.loads(result.text)
    assert type(pruned) is type(document)
    if isinstance(document, dict):
        assert list(pruned) == list(document)
    assert result.tokens_after <= budget


def expand(text: str) -> list[str]:
    """Undo dedupe_lines (the lines come back without trailing whitespace)."""
    lines: list[str] = []
    for line in text.split("\n"):
        if block := re.fullmatch(r"\[the (\d+) lines above repeated (\d+) times\]", line):
            size, times = int(block[1]), int(block[2])
            lines += lines[-size:] * (times - 1)
        elif single := re.fullmatch(r"(.*) \[repeated (\d+) times\]", line):
            lines += ["" if single[1] == "[blank line]" else single[1]] * int(single[2])
        else:
            lines.append(line.rstrip())
    return lines


repeated_runs = st.lists(
    st.tuples(st.lists(st.text(alphabet="ab ", max_size=12), min_size=1, max_size=3), st.integers(1, 30)),
    max_size=12,
).map(lambda runs: "\n".join(line for block, times in runs for _ in range(times) for line in block))


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(repeated_runs, line_text), end=st.sampled_from(["", "\n"]))
def test_dedupe_lines_collapses_repeats_without_losing_lines(text, end):
    text += end
    deduped = dedupe_lines(text)
    assert len(deduped) <= len(text)
    assert expand(deduped) == [line.rstrip() for line in text.split("\n")]


@given(line=st.text(alphabet="abc ", min_size=20, max_size=40).map(str.strip).filter(lambda s: len(s) >= 20),
       times=st.integers(2, 500), trailing=st.lists(st.sampled_from([" ", "\t", "\r"]), max_size=3).map("".join))
def test_a_repeated_line_becomes_one_line(line, times, trailing):
    text = "start\n" + f"{line}{trailing}\n" * times + "end"
    assert dedupe_lines(text) == f"start\n{line} [repeated {times} times]\nend"


# --- examples ------------------------------------------------------------------------------

SHELL_LOG = (
    "$ make test\n"
    + "".join(f"PASS tests/test_{i:02d}.py ({i} ms)\n" for i in range(1, 21))
    + "FAIL tests/test_21.py: expected 3, got 4\n"
    + "2 failed, 20 passed\n"
)


def test_a_shell_log_keeps_its_first_and_last_lines():
    result = compact(SHELL_LOG, strategy="head_tail", max_tokens=40, count=words)
    # 40 words: the marker takes 9, the head up to 60% of the other 31 (18: 15 used),
    # the tail what is left (16: 14 used).
    assert result == Compacted(
        text=(
            "$ make test\n"
            "PASS tests/test_01.py (1 ms)\n"
            "PASS tests/test_02.py (2 ms)\n"
            "PASS tests/test_03.py (3 ms)\n"
            "[… 16 lines (~64 tokens) omitted; full output retrievable]\n"
            "PASS tests/test_20.py (20 ms)\n"
            "FAIL tests/test_21.py: expected 3, got 4\n"
            "2 failed, 20 passed\n"
        ),
        tokens_before=93, tokens_after=38, strategy="head_tail", changed=True,
    )


def test_a_shell_log_tail_with_a_char_counter():
    result = compact(SHELL_LOG, strategy="tail", max_tokens=40, count=quarter_chars)
    assert result.text == (
        "[… 20 lines (~143 tokens) omitted; full output retrievable]\n"
        "PASS tests/test_20.py (20 ms)\n"
        "FAIL tests/test_21.py: expected 3, got 4\n"
        "2 failed, 20 passed\n"
    )
    assert (result.tokens_before, result.tokens_after) == (166, 38)


def test_a_shell_log_head():
    result = compact(SHELL_LOG, strategy="head", max_tokens=30, count=quarter_chars)
    assert result.text == (
        "$ make test\nPASS tests/test_01.py (1 ms)\n[… 21 lines (~156 tokens) omitted; full output retrievable]"
    )


def test_a_single_huge_line_is_cut_by_characters():
    text = "lorem ipsum " * 1000
    for count in (quarter_chars, pieces):
        result = compact(text, strategy="head_tail", max_tokens=100, count=count)
        head, tail = head_and_tail(result.text)
        assert head.endswith("\n") and text.startswith(head[:-1]) and len(head) > 100
        assert text.endswith(tail) and len(tail) > 50
        assert "1 line " in result.text
        assert result.tokens_after <= 100


def test_a_long_last_line_is_cut_by_characters_after_whole_head_lines():
    text = "".join(f"line {i}\n" for i in range(50)) + "x" * 5000
    result = compact(text, strategy="head_tail", max_tokens=200, count=quarter_chars)
    head, tail = head_and_tail(result.text)
    assert head.startswith("line 0\nline 1\n") and head.endswith("\n") and text.startswith(head)
    assert set(tail) == {"x"} and len(tail) > 200


def test_cuts_fall_on_line_boundaries():
    text = "".join(f"{i:05d} some output of a command\n" for i in range(2000))
    for count in COUNTERS:
        head, tail = head_and_tail(compact(text, strategy="head_tail", max_tokens=300, count=count).text)
        assert text.startswith(head) and head.endswith("\n")
        assert text.endswith(tail) and text[-len(tail) - 1] == "\n"


def test_the_marker_counts_the_omitted_lines():
    text = "".join(f"row {i}\n" for i in range(100))
    result = compact(text, strategy="head_tail", max_tokens=30, count=words)
    head, tail = head_and_tail(result.text)
    kept = head.count("\n") + tail.count("\n")
    assert f"[… {100 - kept} lines " in result.text


def test_a_budget_too_small_for_the_marker_gives_a_truncated_marker():
    result = compact(SHELL_LOG, strategy="head_tail", max_tokens=3, count=words)
    assert result.text == "[… 23 lines "
    assert result.tokens_after == 3
    assert compact("x" * 100, strategy="tail", max_tokens=1, count=quarter_chars).text == "[… 1"


def test_count_is_called_a_logarithmic_number_of_times_on_small_candidates():
    text = "".join(f"{i:06d} DEBUG worker heartbeat ok, queue depth {i % 17}\n" for i in range(100_000))
    for count in (words, quarter_chars):
        sizes: list[int] = []

        def counting(candidate: str, count=count, sizes=sizes) -> int:
            sizes.append(len(candidate))
            return count(candidate)

        result = compact(text, strategy="head_tail", max_tokens=500, count=counting)
        assert result.tokens_after <= 500
        assert sizes[0] == len(text)  # the original, measured once
        assert len(sizes) <= 80
        assert max(sizes[1:]) <= 4 * len(result.text)


API_RESPONSE = json.dumps({
    "object": "list",
    "data": [
        {"id": f"cus_{i:04d}", "name": f"Customer {i}", "email": f"c{i}@example.com", "tags": ["a", "b"],
         "notes": "x" * 300}
        for i in range(200)
    ],
    "has_more": True,
    "url": "/v1/customers",
}, indent=2)


def test_a_big_json_response_keeps_its_structure():
    result = compact(API_RESPONSE, strategy="json_prune", max_tokens=100, count=quarter_chars)
    # Three items of 200, four keys of five ("tags" is shorter than a summary of it), every
    # top-level key.
    item = '{{"id":"cus_000{0}","name":"Customer {0}","email":"c{0}@example.com","tags":["a","b"],"…":"1 more key"}}'
    text = (
        '{"object":"list","data":[' + ",".join(item.format(i) for i in range(3)) + ',"… 197 more items"],'
        '"has_more":true,"url":"/v1/customers"}'
    )
    assert result == Compacted(text, tokens_before=23466, tokens_after=quarter_chars(text), strategy="json_prune",
                               changed=True)
    assert result.tokens_after == 94


def test_json_prune_shortens_long_strings_before_dropping_keys():
    result = compact(API_RESPONSE, strategy="json_prune", max_tokens=400, count=quarter_chars)
    document = json.loads(result.text)
    assert list(document) == ["object", "data", "has_more", "url"]
    first = document["data"][0]
    assert list(first) == ["id", "name", "email", "tags", "notes"]
    assert first["notes"] == "x" * 120 + "… [180 more chars]"
    assert document["data"][-1] == f"… {200 - (len(document['data']) - 1)} more items"


def test_json_prune_re_serialises_compactly_when_that_is_enough():
    text = json.dumps({"a": [1, 2, 3], "b": {"c": "d"}}, indent=4)
    result = compact(text, strategy="json_prune", max_tokens=8, count=quarter_chars)
    assert result.text == '{"a":[1,2,3],"b":{"c":"d"}}'
    assert result.strategy == "json_prune"


@pytest.mark.parametrize("text", ["not json " * 50, '{"a": NaN, "pad": "' + "y" * 400 + '"}', "[" * 5000])
def test_text_that_is_not_json_falls_back_to_head_tail(text):
    result = compact(text, strategy="json_prune", max_tokens=30, count=quarter_chars)
    assert result.strategy == "head_tail"
    assert result.tokens_after <= 30
    head, tail = head_and_tail(result.text)
    assert_prefix(text, head)
    assert text.endswith(tail)


def test_json_that_no_level_fits_falls_back_to_head_tail():
    text = json.dumps({f"key_{i}": i for i in range(500)})
    result = compact(text, strategy="json_prune", max_tokens=60, count=quarter_chars)
    assert result.strategy == "head_tail"
    assert result.tokens_after <= 60


BUILD_LOG = (
    "Collecting packages\n"
    + "warning: retrying connection to mirror (timeout)   \n" * 40
    + "Downloading wheel\n"
    + "  File \"app.py\", line 3, in recurse\n    return recurse(n - 1)\n" * 25
    + "RecursionError: maximum recursion depth exceeded\n"
)


def test_repeated_lines_are_collapsed():
    result = compact(BUILD_LOG, strategy="dedupe_lines", max_tokens=100, count=words)
    assert result.text == (
        "Collecting packages\n"
        "warning: retrying connection to mirror (timeout) [repeated 40 times]\n"
        "Downloading wheel\n"
        '  File "app.py", line 3, in recurse\n'
        "    return recurse(n - 1)\n"
        "[the 2 lines above repeated 25 times]\n"
        "RecursionError: maximum recursion depth exceeded\n"
    )
    assert result.strategy == "dedupe_lines"
    assert result.tokens_after == words(result.text) == 35


def test_collapsed_lines_still_over_budget_are_cut():
    text = BUILD_LOG + "".join(f"unique line {i}\n" for i in range(300))
    result = compact(text, strategy="dedupe_lines", max_tokens=60, count=quarter_chars)
    assert result.strategy == "dedupe_lines+head_tail"
    assert result.tokens_after <= 60
    assert result.text.startswith("Collecting packages\nwarning: retrying connection to mirror (timeout) [repeated 40")
    assert result.text.endswith("unique line 299\n")


def test_nothing_repeated_means_plain_head_tail():
    result = compact(SHELL_LOG, strategy="dedupe_lines", max_tokens=40, count=words)
    assert result == compact(SHELL_LOG, strategy="head_tail", max_tokens=40, count=words)


# --- arguments and rules -------------------------------------------------------------------


def test_an_unknown_strategy_names_the_known_ones():
    with pytest.raises(ValueError, match="head_tail, head, tail, json_prune, dedupe_lines"):
        compact("x", strategy="middle", max_tokens=10, count=words)


@pytest.mark.parametrize("max_tokens", [0, -5])
def test_the_budget_must_be_positive(max_tokens):
    with pytest.raises(ValueError, match="max_tokens"):
        compact("x", strategy="head", max_tokens=max_tokens, count=words)


def test_head_share_must_be_a_share():
    with pytest.raises(ValueError, match="head_share"):
        compact("x", strategy="head_tail", max_tokens=10, count=words, head_share=1.5)


def test_the_first_matching_rule_wins():
    rules = [CompactionRule("bash", 500, "tail"), CompactionRule("bash*", 2000, "head_tail"),
             CompactionRule("*", 8000, "head")]
    assert rule_for("bash", rules) is rules[0]
    assert rule_for("bash_exec", rules) is rules[1]
    assert rule_for("Bash", rules) is rules[2]  # globs are case-sensitive
    assert rule_for("read_file", rules[:2]) is None


def test_rules_come_from_the_policy_document():
    policy = {"outputs": {"duplicates": {"suppress": True}, "compaction": [
        {"tools": "bash*", "max_tokens": 2000, "strategy": "head_tail"},
        {"tools": "mcp_github_*", "max_tokens": 1500, "strategy": "json_prune", "note": "ignored"},
    ]}}
    expected = [CompactionRule("bash*", 2000, "head_tail"), CompactionRule("mcp_github_*", 1500, "json_prune")]
    assert rules_from_policy(policy) == expected
    assert rules_from_policy(policy["outputs"]) == expected  # the outputs section alone
    assert rules_from_policy({}) == rules_from_policy({"outputs": {}}) == rules_from_policy({"outputs": None}) == []


@pytest.mark.parametrize(("entry", "message"), [
    ({"tools": "bash*", "max_tokens": 2000, "strategy": "middle"}, "unknown compaction strategy"),
    ({"tools": "bash*", "max_tokens": 0, "strategy": "head"}, "max_tokens"),
    ({"tools": "bash*", "strategy": "head"}, "rule 0 needs"),
    ("bash*", "rule 0 is not an object"),
])
def test_a_malformed_rule_is_an_error(entry, message):
    with pytest.raises(ValueError, match=message):
        rules_from_policy({"outputs": {"compaction": [entry]}})


# --- searching from a guess ----------------------------------------------------------------


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=60),
    limit=st.integers(min_value=0, max_value=300),
    guess=st.integers(min_value=-5, max_value=80),
)
def test_a_guess_never_changes_the_answer_of_a_monotone_search(sizes, limit, guess):
    from toolscope_agent.engine.compaction import _largest

    def measure(k: int) -> int:
        return sum(sizes[:k])

    hi = len(sizes)
    expected = max(k for k in range(hi + 1) if measure(k) <= limit)
    assert _largest(measure, limit, hi, 0, guess) == (expected, measure(expected))
    assert _largest(measure, limit, hi, 0) == (expected, measure(expected))


def test_a_known_count_is_trusted_and_the_search_counts_only_near_the_cut():
    text = "".join(f"{i:06d} DEBUG worker heartbeat ok, queue depth {i % 17}\n" for i in range(2_000))
    counted: list[str] = []

    def counting(candidate: str) -> int:
        counted.append(candidate)
        return pieces(candidate)

    result = compact(text, strategy="head_tail", max_tokens=500, count=counting, tokens=pieces(text))
    assert result.tokens_before == pieces(text)
    assert result.tokens_after == pieces(result.text) <= 500
    assert text not in counted  # the original was not counted again
    # template, head (guess, one more line), tail (guess, one more line), the result: the guess
    # from the text's tokens per character lands next to the answer on even text.
    assert len(counted) <= 8
    assert result == compact(text, strategy="head_tail", max_tokens=500, count=pieces)


# --- artifact ids ------------------------------------------------------------------------------


def test_an_artifact_id_is_the_start_of_the_originals_sha256():
    assert artifact_id("hello\n") == hashlib.sha256(b"hello\n").hexdigest()[:24]
    assert re.fullmatch(r"[0-9a-f]{24}", artifact_id("\ud800 a lone surrogate"))
    assert artifact_id("a") != artifact_id("a ")


ID = artifact_id(SHELL_LOG)
RETRIEVAL = f'full output: retrieve_tool_output(id="{ID}")'


@pytest.mark.parametrize("strategy", ["head_tail", "head", "tail", "dedupe_lines"])
def test_a_cut_with_an_id_names_it_in_the_marker(strategy):
    result = compact(SHELL_LOG, strategy=strategy, max_tokens=60, count=words, artifact_id=ID)
    assert result.changed and result.artifact_id == ID
    assert re.search(r"\[… \d+ lines? \(~\d+ tokens\) omitted; " + re.escape(RETRIEVAL) + r"\]", result.text)
    assert result.tokens_after == words(result.text) <= 60


def test_json_prune_with_an_id_ends_with_a_note_inside_the_budget():
    result = compact(API_RESPONSE, strategy="json_prune", max_tokens=120, count=quarter_chars,
                     artifact_id=artifact_id(API_RESPONSE))
    document, note = result.text.rsplit("\n", 1)
    assert result.strategy == "json_prune"
    assert list(json.loads(document)) == ["object", "data", "has_more", "url"]
    assert note == f'[compacted; full output: retrieve_tool_output(id="{artifact_id(API_RESPONSE)}")]'
    assert result.tokens_after == quarter_chars(result.text) <= 120


def test_collapsed_lines_that_fit_end_with_the_note():
    text = "start\n" + "same line\n" * 100 + "end\n"
    result = compact(text, strategy="dedupe_lines", max_tokens=30, count=words, artifact_id="0" * 24)
    assert result.text == ('start\nsame line [repeated 100 times]\nend\n'
                           '[compacted; full output: retrieve_tool_output(id="000000000000000000000000")]')
    assert result.strategy == "dedupe_lines"


def test_a_note_that_does_not_fit_beside_the_json_gives_a_head_tail_cut_naming_the_id():
    text = json.dumps({"items": list(range(400))})
    result = compact(text, strategy="json_prune", max_tokens=20, count=pieces, artifact_id="f" * 24)
    assert result.strategy == "head_tail"
    assert result.tokens_after <= 20


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_text, budget=st.integers(min_value=1, max_value=200), strategy=st.sampled_from(STRATEGIES),
       count=st.sampled_from(COUNTERS))
def test_with_an_id_the_budget_holds_and_the_id_is_named_when_it_fits(text, budget, strategy, count):
    result = compact(text, strategy=strategy, max_tokens=budget, count=count, artifact_id=artifact_id(text))
    if not result.changed:
        assert result.text == text
        return
    assert result.tokens_after == count(result.text) <= budget
    # Only a budget too small for the whole marker loses the id (the marker is then cut short).
    named = f'retrieve_tool_output(id="{artifact_id(text)}")' in result.text
    marker_only = "\n" not in result.text and (result.text.startswith("[…") or "[…".startswith(result.text))
    assert named or marker_only


def test_without_an_id_nothing_changes():
    with_none = compact(SHELL_LOG, strategy="head_tail", max_tokens=40, count=words)
    assert "full output retrievable]" in with_none.text and with_none.artifact_id is None
