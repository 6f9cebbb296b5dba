"""API keys: created with a secret shown once, stored as a hash, verified in constant time.

A key reads `ts_<prefix>_<secret>`. The prefix is random, unique and stored in clear so that a
request finds its key with one indexed lookup and an operator can recognise a key in a list. The
secret carries 256 bits from `secrets`; with that much entropy a single SHA-256 is as strong as a
slow password hash and keeps verification cheap on the ingest hot path.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from toolscope.telemetry.models import ApiKey, Project, Scope

logger = logging.getLogger(__name__)

KEY_PREFIX = "ts_"
# last_used_at is written at most this often per key, so busy keys do not write on every request.
LAST_USED_RESOLUTION_SECONDS = 60


@dataclass(frozen=True)
class CreatedKey:
    api_key: ApiKey
    secret: str  # the whole key, shown to the user once and never stored


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def api_key_split(raw: str) -> tuple[str, str] | None:
    """(prefix, secret) of a key in the `ts_<prefix>_<secret>` form (the secret may hold "_")."""
    if not raw.startswith(KEY_PREFIX):
        return None
    prefix, sep, secret = raw[len(KEY_PREFIX) :].partition("_")
    if not sep or not prefix or not secret:
        return None
    return prefix, secret


def api_key_create(
    *,
    project: Project,
    name: str,
    scopes: Iterable[str],
    created_by: AbstractBaseUser | None = None,
) -> CreatedKey:
    scope_list = sorted(set(scopes))
    unknown = [s for s in scope_list if s not in Scope.values]
    if not scope_list or unknown:
        raise ValidationError({"scopes": f"Choose scopes from {', '.join(Scope.values)}; got {unknown or 'none'}."})
    prefix = secrets.token_hex(4)
    secret = secrets.token_urlsafe(32)
    api_key = ApiKey.objects.create(
        project=project,
        name=name,
        prefix=prefix,
        secret_hash=_hash(secret),
        scopes=scope_list,
        created_by=created_by,
    )
    return CreatedKey(api_key=api_key, secret=f"{KEY_PREFIX}{prefix}_{secret}")


def api_key_verify(*, raw: str) -> ApiKey | None:
    """The active key that `raw` is, or None. Never says which part was wrong."""
    parts = api_key_split(raw.strip())
    if parts is None:
        return None
    prefix, secret = parts
    api_key = ApiKey.objects.select_related("project").filter(prefix=prefix).first()
    if api_key is None or not hmac.compare_digest(api_key.secret_hash, _hash(secret)):
        return None
    if api_key.revoked_at is not None:
        return None
    _touch(api_key)
    return api_key


def _touch(api_key: ApiKey) -> None:
    now = timezone.now()
    stale_before = now - timezone.timedelta(seconds=LAST_USED_RESOLUTION_SECONDS)
    if api_key.last_used_at is None or api_key.last_used_at < stale_before:
        # Conditional so concurrent requests write once.
        ApiKey.objects.filter(pk=api_key.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale_before)
        ).update(last_used_at=now)
        api_key.last_used_at = now


def api_key_cache_key(*, prefix: str, secret_hash: str) -> str:
    """Where a verified key is remembered (api/keycache.py): named by what the row stores, so
    revoking can drop the entry without knowing the secret."""
    return f"apikey:{prefix}:{secret_hash}"


def api_key_cache_forget(*, api_key: ApiKey) -> None:
    """Drop the cached verification of a revoked key; call after the revocation commits."""
    try:
        cache.delete(api_key_cache_key(prefix=api_key.prefix, secret_hash=api_key.secret_hash))
    except Exception:  # the entry expires on its own (api/keycache.py KEY_SECONDS)
        logger.warning("could not drop the cached verification of key %s", api_key.prefix, exc_info=True)


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke the key and, once that commits, drop its cached verification: endpoints that poll
    (GET /api/v1/policy) authenticate from the cache and must stop accepting it at once."""
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    transaction.on_commit(lambda: api_key_cache_forget(api_key=api_key), robust=True)
    return api_key
