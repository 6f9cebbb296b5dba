"""Configuration parsing: a bad value fails at start and names the variable."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from toolscope.env import env_bool, env_choice, env_int, env_list, env_origins, env_url


@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("1", True), ("off", False), ("No", False)])
def test_env_bool_reads_common_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("DEBUG", raw)
    assert env_bool("DEBUG", not expected) is expected


def test_env_bool_rejects_anything_else_naming_the_variable(monkeypatch):
    monkeypatch.setenv("DEBUG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="DEBUG='maybe'"):
        env_bool("DEBUG", False)


def test_unset_and_blank_take_the_default(monkeypatch):
    monkeypatch.delenv("DEBUG", raising=False)
    assert env_bool("DEBUG", True) is True
    monkeypatch.setenv("DEBUG", "  ")
    assert env_bool("DEBUG", False) is False


def test_env_int_rejects_text_and_values_below_minimum(monkeypatch):
    monkeypatch.setenv("WORKERS", "three")
    with pytest.raises(ImproperlyConfigured, match="WORKERS"):
        env_int("WORKERS", 1)
    monkeypatch.setenv("WORKERS", "0")
    with pytest.raises(ImproperlyConfigured, match="WORKERS=0 must be at least 1"):
        env_int("WORKERS", 1, minimum=1)


def test_env_list_splits_and_rejects_empty_items(monkeypatch):
    monkeypatch.setenv("ALLOWED_HOSTS", "a.example.com, b.example.com")
    assert env_list("ALLOWED_HOSTS", []) == ["a.example.com", "b.example.com"]
    monkeypatch.setenv("ALLOWED_HOSTS", "a.example.com,,b")
    with pytest.raises(ImproperlyConfigured, match="ALLOWED_HOSTS"):
        env_list("ALLOWED_HOSTS", [])


def test_env_origins_require_a_scheme(monkeypatch):
    monkeypatch.setenv("CSRF_TRUSTED_ORIGINS", "toolscope.example.com")
    with pytest.raises(ImproperlyConfigured, match=r"CSRF_TRUSTED_ORIGINS item .toolscope\.example\.com."):
        env_origins("CSRF_TRUSTED_ORIGINS", [])
    monkeypatch.setenv("CSRF_TRUSTED_ORIGINS", "https://toolscope.example.com")
    assert env_origins("CSRF_TRUSTED_ORIGINS", []) == ["https://toolscope.example.com"]


def test_env_url_checks_scheme_and_host(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "mysql://db/toolscope")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL has scheme 'mysql'"):
        env_url("DATABASE_URL", ("postgres",))
    monkeypatch.setenv("DATABASE_URL", "postgres:///toolscope")
    with pytest.raises(ImproperlyConfigured, match=r"DATABASE_URL.*has no host"):
        env_url("DATABASE_URL", ("postgres",))
    monkeypatch.delenv("DATABASE_URL")
    assert env_url("DATABASE_URL", ("postgres",)) is None


def test_env_choice_lists_the_choices(monkeypatch):
    monkeypatch.setenv("TOOLSCOPE_ENV", "prod")
    with pytest.raises(ImproperlyConfigured, match=r"TOOLSCOPE_ENV=.prod. must be one of: development, production"):
        env_choice("TOOLSCOPE_ENV", "development", ("development", "production"))
