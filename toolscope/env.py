"""Strict parsing of configuration from the environment.

Every reader raises ImproperlyConfigured with the variable's name when a value is malformed, so a
typo fails at start instead of running with a silently wrong setting.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def env_str(name: str, default: str) -> str:
    value = _raw(name)
    return default if value is None else value


def env_dir(name: str) -> str | None:
    """A directory that must exist when set (None when unset)."""
    value = _raw(name)
    if value is not None and not os.path.isdir(value):
        raise ImproperlyConfigured(f"{name}={value!r} is not a directory.")
    return value


def env_dir_or_off(name: str, default: str | None) -> str | None:
    """A directory that must exist when set, None when set to "off" (or false/0/no/none), `default`
    when unset."""
    value = _raw(name)
    if value is None:
        return default
    return None if env_off(name) else env_dir(name)


def env_off(name: str) -> bool:
    """Whether the variable is set to "off" (or false/0/no/none)."""
    value = _raw(name)
    return value is not None and value.lower() in (*_FALSE, "off", "none")


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean; use one of true/false/1/0/yes/no.")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer.") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} must be at least {minimum}.")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None:
        return list(default)
    items = [item.strip() for item in value.split(",")]
    if any(item == "" for item in items):
        raise ImproperlyConfigured(f"{name}={value!r} has an empty item; separate values by single commas.")
    return items


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} must be one of: {', '.join(choices)}.")
    return value


def env_url(name: str, schemes: tuple[str, ...]) -> str | None:
    """A URL whose scheme is one of `schemes`, or None when the variable is unset."""
    value = _raw(name)
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name} has scheme {parts.scheme!r}; expected one of: {', '.join(schemes)}."
        )
    if parts.scheme not in ("sqlite", "locmem") and not parts.hostname:
        raise ImproperlyConfigured(f"{name}={value!r} has no host.")
    return value


def env_origins(name: str, default: list[str]) -> list[str]:
    origins = env_list(name, default)
    for origin in origins:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ImproperlyConfigured(
                f"{name} item {origin!r} is not an origin like https://toolscope.example.com."
            )
    return origins
