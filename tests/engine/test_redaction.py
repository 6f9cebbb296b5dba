"""The redaction rules shared by the SDK and the server: what is cut, and what is never touched."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolscope_agent.engine import redaction, secret_rules
from toolscope_agent.engine.redaction import (
    REDACTED,
    hashed_marker,
    is_secret_name,
    redact_arguments,
    redact_identifier,
    redact_text,
    redact_tool,
    redact_value,
)

from tests.secret_corpus import secret_kinds

KINDS = secret_kinds()
ORDINARY = Path(__file__).resolve().parent.parent / "fixtures" / "redaction"


def assert_no_secret(kind, redacted: str) -> None:
    for secret in kind.secrets:
        assert secret not in redacted, (kind.name, redacted)


# --- what is cut ---------------------------------------------------------------------------------

def test_the_corpus_has_twenty_and_more_kinds():
    assert len({kind.name for kind in KINDS}) >= 20


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_is_cut_from_text(kind):
    text = f"$ cat config\n{kind.text}\nexit 0"
    redacted = redact_text(text)
    assert_no_secret(kind, redacted)
    assert redacted.startswith("$ cat config\n") and redacted.endswith("\nexit 0")


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_is_cut_from_a_dictionary_key(kind):
    (key,) = redact_value({kind.text: 1})
    assert_no_secret(kind, key)
    assert "[REDACTED:" in key


@pytest.mark.parametrize("kind", [k for k in KINDS if k.short], ids=lambda k: k.name)
def test_every_kind_is_cut_from_an_id_glued_with_underscores(kind):
    # `\b` does not see a key after "_": the id form that slipped through before.
    redacted = redact_identifier(f"call_{kind.text}", max_length=200)
    assert_no_secret(kind, redacted)
    assert redacted.startswith("call_") and "[REDACTED:" in redacted


@pytest.mark.parametrize(("text", "expected"), [
    ("Authorization: Bearer 9f8Kq2LmZx7TbR4wYc1VnA5s", "Authorization: Bearer [REDACTED]"),
    ("postgres://admin:hunter2pass@db.internal:5432/app", "postgres://admin:[REDACTED]@db.internal:5432/app"),
    ("password: hunter2hunter2", "password: [REDACTED]"),
    ("DB_PASSWORD=c0rrect-h0rse", "DB_PASSWORD=[REDACTED]"),
    ('password = "Tr0ub4dor&3"', 'password = "[REDACTED]"'),
    ('{"client_secret": "abcdefgh12345678"}', '{"client_secret": "[REDACTED]"}'),
    ('{\\"api_key\\": \\"k3y-0f-th3-d4y\\"}', '{\\"api_key\\": \\"[REDACTED]\\"}'),
    ("pwd='x8s7d6f5g4'", "pwd='[REDACTED]'"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nok", "[REDACTED]\nok"),
    ("key cut short:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "key cut short:\n[REDACTED]"),
])
def test_secrets_in_context_lose_only_the_secret(text, expected):
    assert redact_text(text) == expected


# --- what is never touched -----------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    'password = click.prompt("Password", hide_input=True)',
    'token = request.headers.get("X")',
    "def get_secret(name):",
    'api_key=os.environ["KEY"]',
    "max_tokens=4096",
    "the token bucket algorithm is fine",
    "task-runner-abcdefghijklmnopqrstuvwxyz",
    "see https://example.com/a@b and http://x.org",
    "def password_strength(value): ...",
    "monkey business",
    'password = "Password"',
    "password: str = Field(...)",
    'token = self.token or settings.API_TOKEN',
    "redis://guest:guest@localhost:6379/0",
    "postgresql://user:${DB_PASSWORD}@db/app",
    "aws AKIAIOSFODNN7EXAMPLE done",  # AWS's documented example key, allowed by gitleaks
    'RegEnumKey = win32api.RegEnumKey',
    '"NextToken": "9f4d9f69-275a-41fe-b58e-2b837bd9ba48"',
    """token = 'variable|default:"Default value"|date:"Y-m-d"'""",
    # Documentation placeholders found in the venv's packages (bench/redaction_speed.py --precision).
    "playwright-cli eval \"() => { document.cookie = 'session=abc123'; }\"",
    "user = User(username='scolvin', password='password1')",
    "mhu = MultiHostUrl('https://foo.com:123,foo:bar@bar.com/path')",
    "    Authorization: Token 401f7ac837da42b97f613d789819ff93537bee6a",  # DRF's documented example
])
def test_ordinary_text_is_left_alone(text):
    assert redact_text(text) == text


@pytest.mark.parametrize("path", sorted(ORDINARY.iterdir()), ids=lambda p: p.name)
def test_ordinary_outputs_pass_through_unchanged(path):
    text = path.read_text()
    assert redact_text(text) == text


def test_python_standard_library_passes_through_unchanged():
    """Precision on real text: every module of the standard library (the tests' fake keys and
    certificates aside). The one literal password in it is allowed by name."""
    root = Path(sysconfig.get_paths()["stdlib"])
    known = {"urllib/request.py": ["geheim$parole"]}
    size, changed = 0, {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(("test/", "site-packages/", "idlelib/idle_test/", "lib2to3/tests/")):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        size += len(text)
        if redact_text(text) != text:
            changed[relative] = [s for s in known.get(relative, []) if s not in redact_text(text)]
    assert size > 10_000_000
    assert changed == {name: secrets for name, secrets in known.items() if name in changed}
    assert set(changed) <= set(known)


def test_text_without_any_keyword_is_returned_as_is():
    text = "plain words, numbers 12345678 and punctuation; nothing else " * 50
    assert redact_text(text) is text
    assert redaction.rule_set().candidates(text) == []


def test_a_rule_runs_only_where_its_keyword_occurs():
    ids = {rule.id for rule in redaction.rule_set().candidates("xoxb here")}
    assert "slack-bot-token" in ids
    assert "github-pat" not in ids


# --- names and structured values -----------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "password", "passwd", "PASSWORD", "db_password", "dbPassword", "secret", "client_secret", "ClientSecret",
    "token", "auth_token", "accessToken", "api_key", "apiKey", "apikey", "X-API-Key", "OPENAI_API_KEY",
    "aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "Authorization", "private_key", "privateKey",
    "credentials", "cookie", "password2", "token_value", "passphrase",
])
def test_names_of_secrets(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    "tokens", "max_tokens", "token_count", "input_tokens", "prompt_tokens", "tokenizer", "keyboard", "key",
    "keys", "secretary", "password_hint", "password_reset_url", "secret_name", "api_key_env", "show_password",
    "next_page_token", "NextToken", "csrf_token", "token_type", "private_key_id", "auth_token_config",
    "Token.String", "key_id", "monkey", "passport", "author", "authority", "ClientRequestToken",
])
def test_names_that_only_mention_secrets(name):
    assert not is_secret_name(name)


def test_values_named_like_secrets_are_replaced_at_any_depth():
    value = {"user": "jane", "password": "short", "nested": [{"aws_secret_access_key": "wJalr/K7MDENG+bPxRfiCY"}],
             "headers": {"Authorization": "Basic amFuZTpodW50ZXIy", "Accept": "*/*"},
             "credentials": {"username": "jane", "pin": "1234"}, "max_tokens": 4096, "token_count": 12}
    assert redact_value(value) == {
        "user": "jane", "password": REDACTED, "nested": [{"aws_secret_access_key": REDACTED}],
        "headers": {"Authorization": REDACTED, "Accept": "*/*"},
        "credentials": {"username": REDACTED, "pin": REDACTED}, "max_tokens": 4096, "token_count": 12,
    }


def test_placeholders_under_secret_names_are_kept():
    value = {"password": "${DB_PASSWORD}", "token": "", "api_key": "[REDACTED]", "secret": True}
    assert redact_value(value) == value


def test_named_argument_keys_are_redacted_at_any_depth():
    arguments = {"env": {"A": "b"}, "cmd": "ls", "nested": [{"env": 1}]}
    assert redact_arguments(arguments, {"env"}) == {"env": REDACTED, "cmd": "ls", "nested": [{"env": REDACTED}]}


def test_a_json_schema_keeps_its_properties_named_password():
    schema = json.loads((ORDINARY / "tool_schema.json").read_text())
    definition = {"name": "login", "description": "Log in to the upstream service.", "input_schema": schema}
    assert redact_tool(definition) == definition


def test_a_secret_literal_in_a_tool_definition_is_cut():
    github = next(k for k in KINDS if k.name == "github-pat")
    definition = {"name": "deploy", "description": f"Deploys with {github.text}.",
                  "input_schema": {"type": "object", "properties": {
                      "repo": {"type": "string", "default": github.text},
                      github.text: {"type": "string"}}}}
    redacted = redact_tool(definition)
    assert_no_secret(github, json.dumps(redacted))
    assert redacted["description"] == "Deploys with [REDACTED]."
    assert redacted["input_schema"]["properties"]["repo"] == {"type": "string", "default": REDACTED}


# --- ids -----------------------------------------------------------------------------------------

def test_ids_with_distinct_secrets_stay_distinct_and_stable():
    keys = [k.text for k in KINDS if k.name in ("github-pat", "stripe-secret-key", "npm-token")]
    ids = [redact_identifier(f"call_{key}") for key in keys]
    assert len(set(ids)) == 3
    assert ids == [redact_identifier(f"call_{key}") for key in keys]


def test_the_hash_depends_on_the_key():
    key = next(k.text for k in KINDS if k.name == "github-pat")
    assert redact_identifier(key, hash_key=b"one") != redact_identifier(key, hash_key=b"two")
    assert redact_identifier(key, hash_key=b"one") == hashed_marker(key, b"one")


def test_an_id_the_hash_would_make_too_long_becomes_one_hash():
    secret = next(k for k in KINDS if k.name == "env-file-password")
    long_id = "x" * 185 + "_" + secret.text
    redacted = redact_identifier(long_id, max_length=200)
    assert len(redacted) <= 200 and redacted == hashed_marker(long_id)


def test_ids_without_secrets_are_kept():
    for value in ("s-7f3a:call_0", "call_Rk2dW9cXq1TmB7vJ0aLpZ3sN", "toolu_01A09q90qw90lq917835lq9"):
        assert redact_identifier(value, max_length=200) == value


# --- properties ----------------------------------------------------------------------------------

FRAGMENTS = [k.text for k in KINDS if k.short] + [
    "Bearer abcdefghijklmnop1234", "password=hunter2hunter2", "https://example.com/a@b", "token bucket",
    "api_key: 'abcd1234efgh'", "my_secret = 'x'", "call_", "\n", " ", '"', "=",
]


@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=12))
def test_redaction_is_idempotent(parts):
    text = "".join(parts)
    once = redact_text(text)
    assert redact_text(once) == once
    identifier = redact_identifier(text)
    assert redact_identifier(identifier) == identifier


# --- the rule set --------------------------------------------------------------------------------

def test_the_vendored_rules_name_their_source_and_license():
    data = json.loads(secret_rules.RULES_FILE.read_text())
    assert len(data["commit"]) == 40 and data["commit"] in data["source"]
    assert "MIT" in data["license"]
    assert "MIT License" in secret_rules.RULES_FILE.with_name("gitleaks.LICENSE").read_text()
    assert len(data["rules"]) >= 200


def test_re2_compiles_every_content_rule():
    data = json.loads(secret_rules.RULES_FILE.read_text())
    content = [r["id"] for r in data["rules"] if "regex" in r and "path" not in r]
    compiled = {r.id for r in redaction.rule_set().rules}
    assert set(content) <= compiled


@pytest.mark.parametrize(("go", "python"), [
    (r"a(?i)b|c", r"a(?i:b)|(?i:c)"),
    (r"(x(?i)y)z", r"(x(?i:y))z"),
    (r"[(?i)]\z", r"[(?i)]\Z"),
    (r"(?i)abc", r"(?i)abc"),
])
def test_go_syntax_is_translated_for_python_re(go, python):
    assert secret_rules.python_pattern(go) == python


def test_without_re2_the_sdk_finds_the_same_secrets(monkeypatch):
    monkeypatch.setattr(secret_rules, "re2", None)
    python_rules = redaction.rule_set.__wrapped__()
    texts = [f"x\n{kind.text}\ny" for kind in KINDS] + [p.read_text() for p in sorted(ORDINARY.iterdir())]
    skipped = {r.id for r in redaction.rule_set().rules} - {r.id for r in python_rules.rules}
    assert not skipped
    for text in texts:
        assert sorted(python_rules.spans(text)) == sorted(redaction.rule_set().spans(text))
