"""The redaction rules shared by the SDK and the server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolscope_agent.engine.redaction import REDACTED, redact_arguments, redact_text, redact_value


@pytest.mark.parametrize(("text", "expected"), [
    ("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123", "export OPENAI_API_KEY=[REDACTED]"),
    ("key sk-ant-api03-" + "x" * 40 + " end", "key [REDACTED] end"),
    ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345", "Authorization: Bearer [REDACTED]"),
    ("postgres://admin:hunter2pass@db.example.com:5432/app", "postgres://admin:[REDACTED]@db.example.com:5432/app"),
    ("aws AKIAIOSFODNN7EXAMPLE done", "aws [REDACTED] done"),
    ("ghp_" + "a" * 36, REDACTED),
    ("password: hunter2hunter2", "password: [REDACTED]"),
    ("DB_PASSWORD=correcthorse", "DB_PASSWORD=[REDACTED]"),
    ('{"client_secret": "abcdefgh12345678"}', '{"client_secret": "[REDACTED]"}'),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "jwt [REDACTED]"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nok", "[REDACTED]\nok"),
])
def test_secret_looking_values_are_cut_out(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize("text", [
    "the token bucket algorithm is fine",
    "task-runner-abcdefghijklmnopqrstuvwxyz",
    "see https://example.com/a@b and http://x.org",
    "def password_strength(value): ...",
    "monkey business",
])
def test_ordinary_text_is_left_alone(text):
    assert redact_text(text) == text


def test_named_argument_keys_are_redacted_at_any_depth():
    arguments = {"env": {"A": "b"}, "cmd": "ls", "nested": [{"env": 1}]}
    assert redact_arguments(arguments, {"env"}) == {"env": REDACTED, "cmd": "ls", "nested": [{"env": REDACTED}]}


def test_redact_value_walks_json():
    value = {"a": ["x", {"b": "token=abcdefgh12345678"}], "n": 3, "none": None}
    assert redact_value(value) == {"a": ["x", {"b": "token=[REDACTED]"}], "n": 3, "none": None}


@given(st.text())
def test_redaction_is_idempotent(text):
    once = redact_text(text)
    assert redact_text(once) == once


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=200))
def test_text_without_markers_is_unchanged(text):
    markers = ("sk", "rk_", "akia", "asia", "gh", "xox", "aiza", "hf_", "eyj", "://", "bearer", "basic",
               "token", "api", "secret", "passw", "private", "-----begin", "gith", "glpat")
    if not any(marker in text.lower() for marker in markers):
        assert redact_text(text) == text


FRAGMENTS = [
    "sk-proj-abcdefghijklmnopqrstuvwxyz0123", "ghp_" + "a" * 36, "AKIAIOSFODNN7EXAMPLE",
    "Bearer abcdefghijklmnop1234", "password=hunter2hunter2", "postgres://u:pw12345678@h/db",
    "https://example.com/a@b", "token bucket", "xoxb-1234567890-abcdef", "api_key: 'abcd1234efgh'",
    "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----", "my_secret = 'x'",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "sk_live_abcdefghijklmnop",
]


@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=12))
def test_the_re2_prefilter_never_changes_the_result(parts):
    import toolscope_agent.engine.redaction as redaction

    text = " ".join(parts)
    assert redaction._could_hold_secret is not None, "google-re2 is a server requirement"
    with_prefilter = redaction.redact_text(text)
    saved, redaction._could_hold_secret = redaction._could_hold_secret, None
    try:
        assert redaction.redact_text(text) == with_prefilter
    finally:
        redaction._could_hold_secret = saved
