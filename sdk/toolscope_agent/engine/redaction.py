"""Redaction: what must never leave the agent or reach a database.

Applied by the SDK to arguments before they are logged or sent, and by the server to every field
of every event before anything is stored:
- **free text** (outputs, errors, messages, prompts, descriptions, any JSON string): each span a
  secret rule finds becomes [REDACTED] and nothing else changes. The rules are gitleaks' rule set,
  used as data (secret_rules.py), plus toolscope's own rules below for the shapes it lacks. A
  keyword alone never redacts anything: `password = click.prompt("Password")` stays as it is.
- **identifiers and dictionary keys** (event, session and call ids, tool names, JSON object keys):
  the secret part becomes [REDACTED:<12 hex>], an HMAC-SHA256 of the secret, so two ids holding
  different secrets stay different and a re-sent event gets the same id again.
- **structured values**: a string whose key is named like a secret (`password`, `api_key`,
  `aws_secret_access_key`, `Authorization`, …, but not `token_count`, `max_tokens` or
  `password_hint`) becomes [REDACTED], whatever it holds, and so does every string below such a
  key; so do the values of the argument keys a tool's `redact` setting names. JSON Schemas (tool
  definitions) are exempt from this: a property named `password` describes a value, it is none.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Collection, Mapping
from functools import cache
from typing import Any

from toolscope_agent.engine.secret_rules import (
    MIN_SECRET_LENGTH,
    RULES_FILE,
    Rule,
    RuleSet,
    rules_from_config,
)

REDACTED = "[REDACTED]"
# The SDK's key for hashed markers. The server passes its own (derived from SECRET_KEY), so a
# hash seen in the database cannot be checked against guesses without it.
DEFAULT_HASH_KEY = b"toolscope-redaction-v1"
HASH_HEX_CHARS = 12
# Identifiers are also scanned after each of their first few `_`s (bounded: keys can be long).
MAX_ID_SCAN, MAX_ID_SPLITS = 256, 8
MAX_PASSES = 3

# --- names ---------------------------------------------------------------------------------------

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
SECRET_WORDS = frozenset({
    "password", "passwords", "passwd", "passphrase", "pwd", "secret", "secrets", "token",
    "apikey", "accesskey", "secretkey", "privatekey", "authtoken", "accesstoken", "refreshtoken",
    "apitoken", "bearertoken", "sessiontoken", "idtoken", "clientsecret", "credential",
    "credentials", "authorization", "cookie", "cookies", "sshpass",
})
SECRET_PAIRS = frozenset({
    ("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"), ("signing", "key"),
    ("encryption", "key"), ("master", "key"), ("account", "key"), ("auth", "key"), ("rediscli", "auth"),
})
# A word ending in one of these names a password however it begins: `PGPASSWORD`, `dbpassword`.
PASSWORD_ENDINGS = ("password", "passwd")
# A name that holds one of these words describes a secret without being one: `token_count`,
# `password_hint`, `secret_name`, `api_key_env`, `next_page_token`, `show_password`.
NOT_SECRET_WORDS = frozenset({
    "count", "counts", "type", "types", "kind", "format", "limit", "limits", "max", "min", "length",
    "len", "size", "usage", "budget", "total", "num", "number", "estimate", "estimated", "ratio",
    "rate", "cost", "price", "name", "names", "id", "ids", "url", "uri", "urls", "endpoint", "path",
    "file", "filename", "dir", "env", "var", "variable", "field", "label", "hint", "prompt",
    "placeholder", "description", "help", "required", "expires", "expiry", "expiration", "ttl",
    "lifetime", "age", "at", "created", "updated", "rotated", "index", "idx", "position", "offset",
    "encoding", "policy", "strategy", "scope", "scopes", "header", "prefix", "suffix", "provider",
    "source", "service", "page", "next", "cursor", "continuation", "csrf", "xsrf", "used",
    "remaining", "reset", "input", "output", "cached", "completion", "reasoning", "is", "has",
    "show", "hide", "use", "enable", "enabled", "allow", "require", "requires", "include", "mask",
    "masked", "redact", "redacted", "visible", "valid", "pattern", "regex", "rule", "version",
    "algorithm", "method", "mode", "manager", "store", "config", "settings", "option", "options",
    # cursors and idempotency tokens name no credential (`NextToken`, `ClientRequestToken`,
    # the AWS CLI's `--starting-token`, `--sequence-token`, `--lock-token`)
    "request", "change", "idempotency", "lifecycle", "purchase", "pagination", "sync", "starting",
    "sequence", "lock",
})
# Pairs that end a name the same way: AWS's `ClientToken` is an idempotency token.
NOT_SECRET_PAIRS = frozenset({("client", "token")})
# Words that may follow the secret word without changing what the value is (`token_value`).
NEUTRAL_TAIL_WORDS = frozenset({"value", "val", "raw", "plain", "plaintext", "b64", "base64", "encoded",
                                "hash", "hashed", "enc", "encrypted"})


@cache
def is_secret_name(name: str) -> bool:
    """Is a key of this name holding a secret? Case- and separator-insensitive, by whole words of
    the name, and by its last word as English compounds go (`apiKey`, `X-API-Key`,
    `OPENAI_API_KEY`, `client_secret`, `password2`: yes; `tokens`, `token_count`, `keyboard`,
    `secretary`, `auth_token_config`, `Token.String`: no)."""
    words = [word.lower() for word in _WORDS.findall(name) if not word.isdigit()]
    while len(words) > 1 and words[-1] in NEUTRAL_TAIL_WORDS:
        words.pop()
    if not words or any(word in NOT_SECRET_WORDS for word in words) or tuple(words[-2:]) in NOT_SECRET_PAIRS:
        return False
    return (words[-1] in SECRET_WORDS or words[-1].endswith(PASSWORD_ENDINGS)
            or tuple(words[-2:]) in SECRET_PAIRS)


# --- toolscope's own rules -------------------------------------------------------------------------
# gitleaks looks for secrets in repositories; agents' text also carries credentials in URLs, HTTP
# headers, key blocks cut short, and passwords too weak for gitleaks' entropy threshold. Each rule
# has the shape of a gitleaks rule and is judged by the same code (entropy, allowlists).

_NOT_A_VALUE = [  # placeholders, references and documentation examples, not values
    r"EXAMPLE", r"(?i:abc123|foo:?bar)",
    # Published example credentials, as gitleaks allows AWS's ...EXAMPLE keys: Django REST
    # framework's documented token.
    r"^401f7ac837da42b97f613d789819ff93537bee6a$",
    r"^\[REDACTED(?::[0-9a-f]+)?\]$", r"^<[^>]*>$", r"^\{[^}]*\}$", r"^\*+$", r"^(?i:x+)$", r"^!\w+$",
    r"^%\(\w+\)[a-z]$", r"^\[+[\w ]*\]+$",
    r"^(?i:pass(?:word)?|passwd|pwd|secret|changeme|changeit|redacted|token|example|dummy|none|null|masterkey)\d{0,3}$",
]
# A value without digits is indistinguishable from a word (`boolean?`, `a%20secret`).
_WORDS_ONLY = r"^(?:[A-Za-z_./~+=?-]|%[0-9A-Fa-f]{2})+$"
_DOTTED_NAME = r"^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+$"  # module.attribute, not a literal
# A value with a digit or a symbol in it (a value of letters only is a word, see _WORDS_ONLY);
# `{}` is the set of characters it cannot hold. Shorter than 8: see _SHORT.
_VALUE = r"[^{0}]*[0-9!#%&*@^|:~][^{0}]*"
_SHORT = r"^.{0,7}$"
_SECRET_FRAGMENTS = ["pass", "pwd", "secret", "token", "key", "credential", "auth", "cookie"]
# A name holding one of the fragments (the keywords too); is_secret_name then judges it whole.
_KEY = r"((?:[A-Za-z_][\w.-]*?)?(?i:" + "|".join(_SECRET_FRAGMENTS) + r")[\w.-]*?)"
# Keywords of the rule that finds names anywhere in a line: every name is_secret_name accepts holds
# one. Not "pass" itself, which every test run's PASSED would bring.
_NAME_KEYWORDS = ["password", "passwd", "passphrase", "sshpass", *(f for f in _SECRET_FRAGMENTS if f != "pass")]
# Command lines and connection strings. An unquoted value runs up to a space, a quote, a shell
# operator, `,` or a closing bracket; it holds no `(`, `[` or `{` (then it is code:
# `password=get(…)`, `token=tokens[0]`) and does not start with `$` (a variable the shell
# expands), `-` (the next option) or `=`. A full stop after it ends the sentence, not the value.
# Quoted values and ODBC's `{…}` run to their end.
_UNQUOTED_END = r"\s'\"\x60;&|<>()\[\]{},\\"


def _argument(*, padding_only: bool = False) -> str:
    """A value as above, with a digit or a symbol in it (one of letters only is a word); 4 groups.
    `padding_only`: `=` only at its end, as base64 pads, not `--key PGPASSWORD=…` taken whole."""
    end = _UNQUOTED_END + ("=" if padding_only else "")
    unquoted = (r"((?:[^" + end + r"$=-][^" + end + r"]*?)?[0-9!#%*@^:~][^" + end + r"]*?"
                + ("=*" if padding_only else "") + r")\.?(?:[\s'\"\x60;&|<>)\]},\\]|$)")
    return (r"(?:'(" + _VALUE.format(r"'\n") + r")'|\"(" + _VALUE.format(r"\"\n") + r")\"|\{([^{}()\n'\"]+)\}|"
            + unquoted + ")")


_ARGUMENT = _argument()
# Values that are not passwords: variables, command substitutions, paths and files, UUIDs (ids,
# idempotency tokens), the scope after the access key id of an AWS SigV4 `Credential=`.
_REFERENCE = [r"^\$\w+$", r"^\$[({]", r"^(?:~|\.{1,2})?/[\w./-]+$", r"^fileb?://",
              r"^(?i:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$",
              r"/\d{8}/[\w-]+/[\w-]+/aws4_request$"]
_NOT_A_PASSWORD = [*_NOT_A_VALUE, *_REFERENCE, _WORDS_ONLY]
# Clients whose short option gives the password: mysql's `-p` only attached (`-p app` asks for
# one and names a database), the others' attached or not, within 200 characters of the command
# (bounded for Python's re: `mysql mysql mysql…`); openssl's `-passin pass:…`.
_PASSWORD_OPTION = "|".join((
    r"\b(?:mysql\w*|mariadb[\w-]*)\b[^\n;&|\x60,]{0,200}?[ \t]-p",
    (r"\b(?:(?:docker|podman|buildah|skopeo|nerdctl|oras|cf|oc|az)[ \t]+login|helm[ \t]+registry[ \t]+login"
     r"|sshpass|mongo(?:sh|dump|restore|import|export)?)\b[^\n;&|\x60,]{0,200}?[ \t]-p(?:[ \t]+|=)?"),
    r"\b(?:sqlcmd|bcp)\b[^\n;&|\x60,]{0,200}?[ \t]-P[ \t]*",
    r"\bredis-cli\b[^\n;&|\x60,]{0,200}?[ \t]-a[ \t]+",
    r"[ \t]-pass(?:in|out)?[ \t]+pass:",
))
OWN_RULES: list[dict[str, Any]] = [
    {"id": "toolscope-private-key-block", "keywords": ["-----begin"],
     # Blocks cut short (no END line) and short bodies, which gitleaks' private-key rule misses.
     "regex": r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:\r?\n|\\r?\\n){1,2}[A-Za-z0-9+/=]"
              r"(?s:.*?)(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\z)"},
    {"id": "toolscope-url-password", "keywords": ["://"],
     # group 1 is the user: `guest:guest@` is a default, not a secret.
     # The password runs to the last `@` of the authority: people type `p@ss` unencoded. The user
     # may be empty (`redis://:password@host`).
     "regex": r"\b[a-zA-Z][a-zA-Z0-9+.-]*://([^\s:/@'\"\x60<>]*):([^\s/?#'\"\x60<>]+)@",
     "secretGroup": 2,
     "allowlists": [{"regexes": [*_NOT_A_VALUE, _WORDS_ONLY, r"^[A-Z][A-Z0-9_]*$"]},
                    {"regexTarget": "match", "regexes": [r"@(?:[\w-]+\.)*example\.(?:com|org|net)$"]}]},
    {"id": "toolscope-bearer", "keywords": ["bearer"], "entropy": 3.0,
     "regex": r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]{16,}={0,2})"},
    {"id": "toolscope-token-header", "keywords": ["token"], "entropy": 3.0,
     # `Token abc…` (a header or prose), not a `--next-token` flag's value.
     "regex": r"(?i)(?:^|[^\w.-])token[ \t]+([A-Za-z0-9._~+/-]{16,}={0,2})",
     "allowlists": [{"regexes": [*_NOT_A_VALUE, _WORDS_ONLY]}]},
    {"id": "toolscope-basic-auth", "keywords": ["basic"], "entropy": 2.5,
     "regex": r"(?i)\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?basic[ \t]+([A-Za-z0-9+/]{12,}={0,2})"},
    {"id": "toolscope-provider-key", "keywords": ["sk-proj-", "sk-svcacct-", "sk-admin-", "sk-ant-"],
     "entropy": 3.0,
     # gitleaks' OpenAI and Anthropic rules want exact lengths and markers that keys cut or
     # reformatted by a tool no longer have; the prefixes alone are distinctive enough.
     "regex": r"\b(sk-(?:proj|svcacct|admin|ant-(?:api|admin|sid)\d{2})-[A-Za-z0-9_-]{20,})"},
    {"id": "toolscope-aws-secret-access-key", "keywords": ["secret_access_key", "secretaccesskey"],
     "entropy": 3.5,
     # gitleaks has the key id (AKIA…) but not its secret, which has no shape of its own.
     "regex": r"(?i)aws_?secret_?access_?key[\"']?[ \t]*(?:=|:|=>)[ \t]*[\"']?([A-Za-z0-9/+]{40})"
              r"(?:[^A-Za-z0-9/+=]|$)"},
    {"id": "toolscope-quoted-assignment", "keywords": _SECRET_FRAGMENTS,
     # A quoted literal assigned to a key named like a secret: `password = "hunter2!"`,
     # `"client_secret": "…"`; group 1 is the key, checked by is_secret_name.
     "regex": r"(?:^|[^\w.-])\\?[\"']?" + _KEY + r"\\?[\"']?[ \t]*(?:=|:=|:|=>)[ \t]*"
              r"(?:\\?\"(" + _VALUE.format(r"\"'\\\s\x60") + r")\\?\"|'(" + _VALUE.format(r"\"'\\\s\x60") + ")')",
     "secretGroup": 2, "allowlists": [{"regexes": [*_NOT_A_VALUE, _WORDS_ONLY, _SHORT]}]},
    {"id": "toolscope-line-assignment", "keywords": _SECRET_FRAGMENTS,
     # A line that is only `NAME=value` (.env, shell, INI) or `name: value` (YAML). A program's
     # assignments hold calls, subscripts, strings or names (`password = click.prompt(…)`,
     # `token = self.token`): brackets, quotes and digit-less values are not taken.
     "regex": r"(?m)^[+-]?[ \t]*(?:export[ \t]+)?" + _KEY
              + r"(?:[ \t]*=[ \t]*|:[ \t]+)(" + _VALUE.format(r"\s'\"\x60(){}\[\],;<>$") + r")[ \t]*\r?$",
     "secretGroup": 2, "allowlists": [{"regexes": [*_NOT_A_VALUE, _WORDS_ONLY, _DOTTED_NAME, _SHORT]}]},
    {"id": "toolscope-inline-assignment", "keywords": _NAME_KEYWORDS,
     # `NAME=value` with more text after it: an option (`--password=…`, `-Ddb.password=…`), an
     # environment variable before a command or exported (`PGPASSWORD=… psql`), a parameter of
     # a URL, a JDBC or an ODBC string (`&password=…&`, `;Pwd=…;`); and an option's value after
     # a space (`--password …`), not `--no-password db`. One rule, so one scan of the text. A
     # name starts after a character that cannot be in it (as in the rules above: Python's re,
     # the SDK's without RE2, would try every `-` of `key-key-key…`), so of two assignments in
     # a row the second is found by the second pass of _redact. Group 1 is the name of an option
     # with a value after a space; the name before `=` is read by the check.
     "regex": r"(?:^|[^\w.-])(?:--?" + _KEY + r"[ \t]+" + _argument(padding_only=True)
              + r"|-{0,2}(?:" + _KEY[1:-1] + r")=" + _ARGUMENT + ")",
     "secretGroup": 2, "allowlists": [{"regexes": [*_NOT_A_PASSWORD, _DOTTED_NAME, _SHORT]},
                                      {"regexTarget": "match", "regexes": [r"^[^\w.-]?-{0,2}(?i:no)[_-]"]}]},
    {"id": "toolscope-client-password-option", "keywords": ["mysql", "mariadb", "login", "sshpass", "mongo",
                                                            "sqlcmd", "bcp", "redis-cli", "pass:"],
     "regex": r"(?:" + _PASSWORD_OPTION + r")" + _ARGUMENT,
     "allowlists": [{"regexes": _NOT_A_PASSWORD}]},
    {"id": "toolscope-curl-user", "keywords": ["curl"],
     # `curl -u user:password`: gitleaks' curl-auth-user takes no punctuation in the password.
     "regex": r"\bcurl\b[^\n;&|\x60]*?[ \t](?:-u|--user|-U|--proxy-user)(?:[ \t]+|=)?"
              r"(?:'[^':\n]*:([^'\n]+)'|\"[^\":\n]*:([^\"\n]+)\"|[^\s:'\"\x60]*:" + _ARGUMENT + ")",
     "allowlists": [{"regexes": _NOT_A_PASSWORD}]},
    {"id": "toolscope-netrc", "keywords": ["machine", "default login"],
     # .netrc entries, one a line or spread over lines: `machine host login user password …`.
     "regex": r"(?:\bmachine\s+\S+(?:\s+(?:login|account|port)\s+\S+){0,3}"
              r"|\bdefault(?:\s+(?:login|account|port)\s+\S+){1,3})\s+password\s+(?:\"([^\"\n]+)\"|([^\s\"'\x60]+))",
     "allowlists": [{"regexes": _NOT_A_PASSWORD}]},
    {"id": "toolscope-oracle-connect", "keywords": ["oracle", "sqlplus"],
     # Oracle's `user/password@database`, in a JDBC URL or on sqlplus's command line.
     "regex": r"\b(?:jdbc:oracle:\w+:|sqlplus[ \t]+(?:-\w+[ \t]+)*)[A-Za-z_][\w$#]*/"
              r"(?:\"([^\"\n]+)\"|([^\s/'\"\x60]+))@",
     "allowlists": [{"regexes": _NOT_A_PASSWORD}]},
]
_CURSOR_TOKEN = r"(?i)(?:" + "|".join(("next", "page", "continuation", "pagination", "sync", "request", "change",
                                         "idempotency", "lifecycle", "purchase")) + r")[_.-]?token"
# Additions to gitleaks' own allowlists, for what agents' text holds and repositories less often.
GITLEAKS_ALLOWLIST_ADDITIONS: dict[str, list[dict[str, Any]]] = {
    "generic-api-key": [
        {"description": "names in code: attribute chains, CONSTANT_NAMES, snake_names, CamelCase2Names",
         "regexes": [_DOTTED_NAME, r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$", r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$",
                     r"^(?:[A-Za-z][a-z]+|[0-9]{1,4})+$", r"^[A-Za-z_./-]+$"]},
        {"description": "cursors, idempotency tokens and ids", "regexTarget": "match",
         "regexes": [_CURSOR_TOKEN,
                     r"(?:[a-z0-9]Id|_id|_ID|-id)[\"']?[ \t]*(?:=|:)"]},
    ],
    "private-key": [
        {"description": "a key block's markers quoted in prose or code, not a block",
         "regexTarget": "match",
         "regexes": [r"^-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----(?:[^\r\n\\]|\\[^rn])"]},
    ],
}


# Rules chosen by their keywords for at least 5% of the standard library's files (bench/
# redaction_speed.py --precision prints the shares): tried together first. Speed only: the
# result is the same with any list. toolscope-inline-assignment is chosen as often but left
# out: in the alternation it slows the scan of every text by a quarter, more than it costs alone.
FREQUENT_RULES = frozenset({
    "vault-service-token", "generic-api-key", "twilio-api-key", "jwt", "lob-api-key",
    "authress-service-client-access-key", "curl-auth-user", "curl-auth-header", "sendgrid-api-token",
    "toolscope-quoted-assignment", "toolscope-line-assignment", "toolscope-url-password",
    "toolscope-token-header", "toolscope-basic-auth",
})


def _group(match: Any, text: str, group: int) -> str:
    start, end = match.span(group)
    return text[start:end]


def _named_like_a_secret(match: Any, text: str) -> bool:
    return is_secret_name(_group(match, text, 1))


def _not_the_user_name(match: Any, text: str) -> bool:
    return _group(match, text, 1) != _group(match, text, 2)


# A Python replacement field where ODBC would quote a value in braces: `f"password={password!r}"`.
_FORMAT_FIELD = re.compile(r"[A-Za-z_][\w.]*(?:\[[^\]]*\])?(?:![rsa])?(?::[^{}]*)?|\d*")


def _not_a_format_field(match: Any, text: str) -> bool:
    """No group of the match is a replacement field in braces."""
    for group in range(1, len(match.groups()) + 1):
        start, end = match.span(group)
        if 0 < start <= end < len(text) and text[start - 1] == "{" and text[end] == "}" \
                and _FORMAT_FIELD.fullmatch(text, start, end):
            return False
    return True


_KEY_VALUE_LIST = re.compile(r"[a-z]+=[^=]")
_ASSIGNED_NAME = re.compile(r"[^\w.-]?-{0,2}([\w.-]+)=")


def _an_option_or_variable_named_like_a_secret(match: Any, text: str) -> bool:
    """toolscope-inline-assignment: the name is one of a secret, an option's value after a space
    is no key=value list (docker build's `--secret id=npmrc,src=…`), and no Python replacement
    field stands for the value."""
    option = match.span(1)[0] >= 0
    assigned = None if option else _ASSIGNED_NAME.match(text, match.start())
    name = _group(match, text, 1) if option else assigned.group(1) if assigned else ""
    if not is_secret_name(name) or not _not_a_format_field(match, text):
        return False
    start, end = next(match.span(i) for i in range(2, len(match.groups()) + 1) if match.span(i)[0] >= 0)
    return not (option and _KEY_VALUE_LIST.match(text, start, end))


@cache
def rule_set() -> RuleSet:
    """gitleaks' rules and toolscope's, compiled once per process."""
    config = json.loads(RULES_FILE.read_text(encoding="utf-8"))
    for spec in config["rules"]:
        spec.setdefault("allowlists", []).extend(GITLEAKS_ALLOWLIST_ADDITIONS.get(spec["id"], ()))
    own = rules_from_config({"allowlist": config["allowlist"], "rules": OWN_RULES})
    checks = {"toolscope-quoted-assignment": _named_like_a_secret, "toolscope-line-assignment": _named_like_a_secret,
              "toolscope-inline-assignment": _an_option_or_variable_named_like_a_secret,
              "toolscope-client-password-option": _not_a_format_field, "toolscope-curl-user": _not_a_format_field,
              "toolscope-url-password": _not_the_user_name}
    own = tuple(dataclasses.replace(r, check=checks[r.id]) if r.id in checks else r for r in own)
    gitleaks: tuple[Rule, ...] = rules_from_config(config)
    return RuleSet(gitleaks + own, frequent=FREQUENT_RULES)


# --- text and identifiers --------------------------------------------------------------------------

def _cut(text: str, spans: list[tuple[int, int]], marker: Callable[[str], str]) -> str:
    """`text` with each span (overlapping ones merged) replaced by marker(secret)."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, cursor = [], 0
    for start, end in merged:
        pieces += [text[cursor:start], marker(text[start:end])]
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _redact(text: str, marker: Callable[[str], str], spans: Callable[[str], list[tuple[int, int]]]) -> str:
    # Cutting a secret can complete another match: `AKIA…` followed by `ghp_…` has no word
    # boundary until the second key becomes "[". A further pass makes redaction idempotent.
    for _ in range(MAX_PASSES):
        found = spans(text)
        if not found:
            break
        text = _cut(text, found, marker)
    return text


def redact_text(text: str) -> str:
    """`text` with every secret replaced by [REDACTED]; the same object when there is none."""
    if len(text) < MIN_SECRET_LENGTH:
        return text
    return _redact(text, lambda _secret: REDACTED, rule_set().spans)


def hashed_marker(secret: str, hash_key: bytes = DEFAULT_HASH_KEY) -> str:
    digest = hmac.new(hash_key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return f"[REDACTED:{digest[:HASH_HEX_CHARS]}]"


def _identifier_spans(text: str) -> list[tuple[int, int]]:
    """Spans in the id, in each of its `:`-separated parts, and in what follows each of the first
    `_`s of a part: ids glue a key to words with `_` and `:` (`resp_…:t0`, `call_…`), and some
    rules want a key to start after a space, quote or `=`, or to end before one."""
    rules = rule_set()
    if len(text) < MIN_SECRET_LENGTH or not rules.candidates(text):
        return []
    spans = rules.spans(text)
    part_start = 0
    for part in text[:MAX_ID_SCAN].split(":"):
        starts = [0, *(i + 1 for i, char in enumerate(part) if char == "_")][:MAX_ID_SPLITS]
        for start in starts if part != text else starts[1:]:
            offset = part_start + start
            spans += [(a + offset, b + offset) for a, b in rules.spans(part[start:])]
        part_start += len(part) + 1
    return spans


def redact_identifier(text: str, *, hash_key: bytes = DEFAULT_HASH_KEY, max_length: int | None = None) -> str:
    """An id or key with each secret in it replaced by a keyed hash of that secret. If that makes
    it longer than `max_length`, the whole id becomes the hash of the whole id."""
    redacted = _redact(text, lambda secret: hashed_marker(secret, hash_key), _identifier_spans)
    if max_length is not None and len(redacted) > max_length:
        return hashed_marker(text, hash_key)
    return redacted


# --- JSON values ----------------------------------------------------------------------------------

_PLACEHOLDER = re.compile("|".join(_NOT_A_VALUE) + r"|^\$\{?\w+\}?$|^\{\{.*\}\}$|^$")


@dataclasses.dataclass(frozen=True)
class _Walk:
    hash_key: bytes
    secret_names: bool  # False for JSON Schemas: their keys name properties, not values
    redact_keys: Collection[str] = ()  # a tool's `redact` setting

    def value(self, value: Any, under_secret: bool = False) -> Any:
        if isinstance(value, str):
            if under_secret and not _PLACEHOLDER.match(value):
                return REDACTED
            return redact_text(value)
        if isinstance(value, dict):
            return {self.key(key): self.item(key, item, under_secret) for key, item in value.items()}
        if isinstance(value, list):
            return [self.value(item, under_secret) for item in value]
        return value

    def item(self, key: Any, item: Any, under_secret: bool) -> Any:
        if key in self.redact_keys:
            return REDACTED
        named = self.secret_names and isinstance(key, str) and is_secret_name(key)
        return self.value(item, under_secret or named)

    def key(self, key: Any) -> Any:
        return redact_identifier(key, hash_key=self.hash_key) if isinstance(key, str) else key


def redact_value(value: Any, *, hash_key: bytes = DEFAULT_HASH_KEY, secret_names: bool = True) -> Any:
    """A copy of a JSON value with secrets cut out of every string and key, and (unless
    `secret_names` is False) every string below a key named like a secret replaced."""
    if isinstance(value, str):
        return redact_text(value)
    if not isinstance(value, dict | list):
        return value
    return _Walk(hash_key, secret_names).value(value)


def redact_arguments(arguments: Any, keys: Collection[str], *, hash_key: bytes = DEFAULT_HASH_KEY) -> Any:
    """Arguments redacted as by redact_value, and the values of `keys` (at any depth) replaced."""
    return _Walk(hash_key, True, frozenset(keys)).value(arguments)


def redact_tool(definition: Mapping[str, Any], *, hash_key: bytes = DEFAULT_HASH_KEY,
                max_length: int | None = None) -> dict[str, Any]:
    """A tool definition in toolscope's shape with secret literals cut out of its name,
    description and schema. Nothing else in the schema changes: its hash and token count are
    those of the definition as sent unless it held a secret."""
    redacted = {}
    for field, value in definition.items():
        if field == "description" and isinstance(value, str):
            redacted[field] = redact_text(value)
        elif field == "input_schema":
            redacted[field] = redact_value(value, hash_key=hash_key, secret_names=False)
        elif isinstance(value, str):
            redacted[field] = redact_identifier(value, hash_key=hash_key, max_length=max_length)
        else:
            redacted[field] = redact_value(value, hash_key=hash_key, secret_names=False)
    return redacted
