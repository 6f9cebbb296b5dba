"""Duplicate tool outputs (engine/duplicates.py): the agent's tracker and the server's linking."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolscope_agent.engine.duplicates import (
    DuplicateTracker,
    find_duplicates,
    normalize_output,
    output_fingerprint,
    placeholder_text,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("a  \nb\t\n\n\n", "a\nb"),
    ("line one\r\nline two\r\n", "line one\nline two"),
    ("  indented\n\tkept  ", "  indented\n\tkept"),
    (" \n\t\n", ""),
    ("", ""),
])
def test_normalize_trims_trailing_whitespace_of_every_line_and_of_the_end(text, expected):
    assert normalize_output(text) == expected


@given(st.text(alphabet=st.sampled_from("ab \t\n\r\u00a0\u2028\x1c\x85\u3000é"), max_size=60) | st.text(max_size=60))
def test_normalize_equals_its_definition_on_any_text(text):
    # The fast path (no line ends in whitespace) must agree with trimming every line.
    assert normalize_output(text) == "\n".join(line.rstrip() for line in text.split("\n")).rstrip()


def test_the_fingerprint_is_the_sha256_of_the_normalized_text():
    assert output_fingerprint("héllo  \n") == hashlib.sha256("héllo".encode()).hexdigest()
    assert output_fingerprint("a\r\nb") == output_fingerprint("a \nb\n\n")
    assert output_fingerprint(" a") != output_fingerprint("a")
    assert len(output_fingerprint("\ud800 lone surrogate")) == 64  # JSON can carry these


def test_the_placeholder_points_at_the_first_call():
    text = placeholder_text(tool_name="read_file", first_call_id="call_3", turn_index=2)
    assert text == "[same output as read_file call call_3 (turn 2); not repeated]"


@given(tool=st.text(min_size=1, max_size=64), call_id=st.text(min_size=1, max_size=64), turn=st.integers(0, 10**6))
def test_the_placeholder_is_short(tool, call_id, turn):
    text = placeholder_text(tool_name=tool, first_call_id=call_id, turn_index=turn)
    assert tool in text and call_id in text and str(turn) in text
    assert len(text) <= len(tool) + len(call_id) + 60
    assert "\n" not in text.replace(tool, "").replace(call_id, "")


def test_where_the_model_saw_no_call_id_the_placeholder_cites_the_arguments():
    # Through the MCP gateway the call id is the gateway's own: the model saw only the arguments.
    tracker = DuplicateTracker()
    assert tracker.check("read_file", "x", call_id="g1", turn_index=0, arguments={"path": "a.py", "limit": 5}) is None
    repeated = tracker.check("read_file", "x\n", call_id="g2", turn_index=3, arguments={"path": "b.py"})
    assert repeated == '[same output as the earlier read_file call with {"limit": 5, "path": "a.py"}; not repeated]'
    assert "g1" not in repeated
    restored = DuplicateTracker.from_dict(json.loads(json.dumps(tracker.to_dict())))
    assert restored.check("read_file", "x", call_id="g3", turn_index=4) == repeated
    long = placeholder_text(tool_name="t", first_call_id="g", turn_index=0, first_arguments={"q": "é" * 500})
    assert len(long) < 200 and long.endswith("…; not repeated]")


def test_the_tracker_replaces_a_repeated_output_of_the_same_tool():
    tracker = DuplicateTracker()
    assert tracker.check("read_file", "contents\n", call_id="c1", turn_index=0) is None
    assert tracker.check("grep", "contents\n", call_id="c2", turn_index=1) is None  # another tool
    assert tracker.check("read_file", "contents   \n\n", call_id="c3", turn_index=2) == (
        "[same output as read_file call c1 (turn 0); not repeated]"
    )
    assert tracker.check("grep", "contents", call_id="c4", turn_index=3) == (
        "[same output as grep call c2 (turn 1); not repeated]"
    )
    assert tracker.check("read_file", "other", call_id="c5", turn_index=3) is None
    assert tracker.check("read_file", "contents", call_id="c1", turn_index=0) is None  # the first call, again
    assert len(tracker) == 3


def test_empty_outputs_are_never_duplicates():
    tracker = DuplicateTracker()
    for index, output in enumerate(["", "  \n", "", "\n\n"]):
        assert tracker.check("bash", output, call_id=f"c{index}", turn_index=index) is None
    assert len(tracker) == 0
    assert find_duplicates([("a", "bash", "", 0), ("b", "bash", " \n", 0)]) == [None, None]


def test_the_tracker_survives_a_round_trip_through_json():
    tracker = DuplicateTracker()
    tracker.check("read_file", "x = 1\n", call_id="c1", turn_index=0)
    tracker.check("bash", "ok", call_id="c2", turn_index=4)
    snapshot = json.loads(json.dumps(tracker.to_dict()))
    assert "x = 1" not in json.dumps(snapshot)  # fingerprints, never outputs
    restored = DuplicateTracker.from_dict(snapshot)
    assert restored.to_dict() == tracker.to_dict()
    assert restored.check("bash", "ok\n", call_id="c9", turn_index=7) == (
        "[same output as bash call c2 (turn 4); not repeated]"
    )


@pytest.mark.parametrize("snapshot", [
    {},
    {"format": 2, "first": []},
    {"format": 1, "first": {}},
    {"format": 1, "first": [["bash", "abc", "c1"]]},
    {"format": 1, "first": [["bash", "abc", "c1", "0"]]},
    {"format": 1, "first": [["bash", "abc", "c1", True]]},
    [],
])
def test_a_malformed_snapshot_is_rejected(snapshot):
    with pytest.raises(ValueError, match="duplicate tracker snapshot"):
        DuplicateTracker.from_dict(snapshot)


def test_find_duplicates_links_each_repeat_to_its_first_occurrence():
    calls = [
        ("c1", "read_file", "def f():\n    return 1\n", 0),
        ("c2", "read_file", "def f():\n    return 1   \n\n", 1),
        ("c3", "grep", "def f():\n    return 1\n", 1),
        ("c4", "read_file", "def f():\n  return 1\n", 2),  # indentation differs
        ("c5", "read_file", "def f():\r\n    return 1\r\n", 3),
        ("c6", "grep", "def f():\n    return 1", 3),
    ]
    assert find_duplicates(calls) == [None, "c1", None, None, "c1", "c3"]


outputs = st.sampled_from(["", "ok", "a\nb", "a\n b", "x" * 50])
trailing = st.lists(st.sampled_from([" ", "\t", "\n", "\r\n"]), max_size=3).map("".join)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(["read_file", "bash", "grep"]), outputs, trailing), max_size=30))
def test_find_duplicates_agrees_with_the_tracker(entries):
    calls = [(f"call_{i}", tool, output + pad, i // 3) for i, (tool, output, pad) in enumerate(entries)]
    found = find_duplicates(calls)
    tracker = DuplicateTracker()
    seen: dict[tuple[str, str], str] = {}
    for (call_id, tool, output, turn), (_, bare, _pad), first in zip(calls, entries, found, strict=True):
        placeholder = tracker.check(tool, output, call_id=call_id, turn_index=turn)
        if not bare:
            assert first is None and placeholder is None
            continue
        expected = seen.setdefault((tool, bare), call_id)  # trailing whitespace ignored, tools apart
        if expected == call_id:  # a first occurrence is never marked
            assert first is None and placeholder is None
        else:
            assert first == expected
            first_turn = int(expected.removeprefix("call_")) // 3
            assert placeholder == placeholder_text(tool_name=tool, first_call_id=expected, turn_index=first_turn)


def test_serialised_tracker_gives_the_same_answers_midway():
    calls = [(f"c{i}", "bash", f"out {i % 4}", i) for i in range(12)]
    whole = DuplicateTracker()
    expected = [whole.check(tool, out, call_id=cid, turn_index=t) for cid, tool, out, t in calls]
    first_half = DuplicateTracker()
    answers = [first_half.check(tool, out, call_id=cid, turn_index=t) for cid, tool, out, t in calls[:6]]
    resumed = DuplicateTracker.from_dict(json.loads(json.dumps(first_half.to_dict())))
    answers += [resumed.check(tool, out, call_id=cid, turn_index=t) for cid, tool, out, t in calls[6:]]
    assert answers == expected
    assert [a is not None for a in answers] == [i >= 4 for i in range(12)]
