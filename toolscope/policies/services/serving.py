"""The published document under a label, as bytes + ETag, from the shared cache.

Agents revalidate often (every few seconds per agent process), so a warm request touches only
the cache: one round trip reads both the project's *generation* token and the label's entry, and
the entry counts only when it was stored under the current token. Publishing, moving or deleting a
label replaces the token after commit. That closes the race where a reader that loaded the old
label from the database stores it after the invalidation: its entry carries the old token and is
ignored. A random token (not a counter) stays safe when the cache evicts it: a fresh one never
equals the token of an older entry. Entries also expire, which bounds staleness if an
invalidation is lost while Redis is down. Web processes that keep a label's ETag in memory for
the warm poll (api/pollmemory.py) drop it before the invalidating request returns
(toolscope/invalidation.py's barrier).

Answers that say "nothing here" are cached the same way, so a project polling before its first
publish does not reach the database either.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from django.core.cache import cache

from toolscope.invalidation import invalidate_on_commit
from toolscope.policies.models import PolicyVersion, SearchHistory
from toolscope.policies.selectors import policy_label_names, policy_label_served

logger = logging.getLogger(__name__)

ENTRY_SECONDS = 300
QUOTE = '"'  # ETags are quoted strings
LABEL_PATTERN = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")
# docs/policy.md's order, so a document read with curl looks like the documentation.
DOCUMENT_ORDER = (
    "schema_version", "project", "label", "version", "etag", "published_at",
    "encoding", "context_window", "selection", "outputs", "tools", "search_history",
)


@dataclass(frozen=True)
class ServedPolicy:
    """Either a document (etag + JSON bytes) or the reason there is none (`missing`)."""

    etag: str = ""
    body: bytes = b""
    missing: str = ""


def policy_served_keys(*, project_id: int, label: str) -> list[str]:
    """The cache keys policy_served reads, for a caller that fetches them along with others."""
    return [_generation_key(project_id), f"policy:served:{project_id}:{label}"]


def policy_served(
    *, project_id: int, project_slug: str, label: str, prefetched: dict[str, Any] | None = None
) -> ServedPolicy:
    """The document agents get for `label`; no database query when the cache holds it.

    `prefetched`: the values of policy_served_keys() already read from the cache (absent keys
    left out), which saves the round trip; None reads them here.
    """
    generation_key, entry_key = policy_served_keys(project_id=project_id, label=label)
    found = prefetched if prefetched is not None else _cache_call(cache.get_many, [generation_key, entry_key])
    token, entry = (found or {}).get(generation_key), (found or {}).get(entry_key)
    if token is not None and entry is not None and entry[0] == token:
        return ServedPolicy(*entry[1:])
    if token is None:
        _cache_call(cache.add, generation_key, _token(), None)
        token = _cache_call(cache.get, generation_key)
    served = _load(project_id, project_slug, label)
    if token is not None:
        entry = (token, served.etag, served.body, served.missing)
        _cache_call(cache.set, entry_key, entry, ENTRY_SECONDS)
    return served


def policy_served_invalidate(*, project_id: int) -> None:
    """Every label of the project is read again from the database, once the transaction commits;
    web processes' memory of them (api/pollmemory.py) is dropped before this returns."""
    key = _generation_key(project_id)
    # The changes of one transaction share one barrier (toolscope/invalidation.py).
    invalidate_on_commit(change=lambda: _cache_call(cache.set, key, _token(), None), names=[key])


def document_body(*, document: dict[str, Any], label: str) -> bytes:
    """The bytes served for a version under `label`: stable for a (version, label) pair, which is
    what lets the version's ETag be a strong one."""
    document = {**document, "label": label}
    ordered = {key: _sorted(document[key]) for key in DOCUMENT_ORDER if key in document}
    ordered.update({key: _sorted(value) for key, value in sorted(document.items()) if key not in ordered})
    return orjson.dumps(ordered)


def _load(project_id: int, project_slug: str, label: str) -> ServedPolicy:
    served = policy_label_served(project_id=project_id, name=label)
    if served is not None:
        version, history = served
        document, etag = _with_search_history(version.document, version.etag, history)
        return ServedPolicy(etag=etag, body=document_body(document=document, label=label))
    if not PolicyVersion.objects.filter(project_id=project_id).exists():
        return ServedPolicy(missing=f"No policy version of project '{project_slug}' has been published yet.")
    names = ", ".join(policy_label_names(project_id=project_id))
    return ServedPolicy(missing=f"Project '{project_slug}' has no label '{label}'; its labels: {names or 'none'}.")


def _with_search_history(document: dict[str, Any], etag: str,
                         history: SearchHistory | None) -> tuple[dict[str, Any], str]:
    """The document with the project's learned search history when it asks for one
    (`selection.tool_search.learned`), and the ETag of the pair: the version's, plus the
    history's revision, so a refreshed history reaches agents as a changed ETag while the
    version itself stays immutable."""
    if not document.get("selection", {}).get("tool_search", {}).get("learned"):
        return document, etag
    if history is None or not history.tools:
        return document, etag
    etag = f'{etag.removesuffix(QUOTE)}-h{history.revision}{QUOTE}'
    return {**document, "etag": etag, "search_history": {"revision": history.revision, "tools": history.tools}}, etag


def _generation_key(project_id: int) -> str:
    return f"policy:generation:{project_id}"


def _token() -> str:
    return uuid.uuid4().hex


def _cache_call(method: Any, *args: Any) -> Any:
    # The cache shares Redis with the broker; agents must still get their policy when it is down.
    try:
        return method(*args)
    except Exception:
        logger.warning("policy cache unavailable; serving from the database", exc_info=True)
        return None


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value
