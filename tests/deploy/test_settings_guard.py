"""A process refuses to start on a production-unsafe or malformed setting, and says which.

Each case runs `python manage.py check` in a fresh process with only the variables given (no
inherited environment), the way a container starts. The servers named in the URLs are never
contacted: nothing listens on port 1.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.deploy import recipe

PRODUCTION = {
    "TOOLSCOPE_ENV": "production",
    "DEBUG": "false",
    "SECRET_KEY": "k" * 50,
    "DATABASE_URL": "postgres://toolscope@127.0.0.1:1/toolscope",
    "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",
    "CELERY_RESULT_BACKEND": "redis://127.0.0.1:1/1",
    "CACHE_URL": "redis://127.0.0.1:1/2",
    "ALLOWED_HOSTS": "toolscope.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://toolscope.example.com",
}
UNSET = None


def manage_check(env: dict[str, str | None], tmp_path) -> subprocess.CompletedProcess[str]:
    clean = {
        "PATH": f"{recipe.VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        # A stray SQLite fallback lands here, never beside manage.py.
        "TOOLSCOPE_SQLITE_PATH": str(tmp_path / "guard.sqlite3"),
    }
    clean.update({key: value for key, value in env.items() if value is not None})
    return subprocess.run(
        ["python", "manage.py", "check"],
        cwd=recipe.REPO_ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def refusal(result: subprocess.CompletedProcess[str]) -> str:
    """The exception line that ends the traceback (source lines above it mention every name)."""
    assert result.returncode != 0, f"started anyway:\n{result.stdout}{result.stderr}"
    last = [line for line in result.stderr.splitlines() if line.strip()][-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: "), result.stderr[-2000:]
    return last


def test_production_settings_start_when_complete(tmp_path):
    result = manage_check(PRODUCTION, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DEBUG", "true"),
        ("DEBUG", "1"),
        ("SECRET_KEY", UNSET),  # the development default
        ("SECRET_KEY", "toolscope-insecure-development-key-do-not-use-in-production"),
        ("SECRET_KEY", "too-short"),
        ("DATABASE_URL", UNSET),  # the SQLite file
        ("DATABASE_URL", "sqlite:////tmp/toolscope.sqlite3"),
        ("CELERY_BROKER_URL", UNSET),  # tasks in the web process
    ],
)
def test_production_refuses_development_conveniences(tmp_path, variable, value):
    assert variable in refusal(manage_check({**PRODUCTION, variable: value}, tmp_path))


@pytest.mark.parametrize("toolscope_env", ["production", "development"])
@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DEBUG", "maybe"),
        ("DATABASE_URL", "mysql://toolscope@127.0.0.1:1/toolscope"),
        ("DATABASE_URL", "toolscope"),
        ("CELERY_BROKER_URL", "kafka://127.0.0.1:1"),
        ("CELERY_RESULT_BACKEND", "db+postgresql://127.0.0.1:1/toolscope"),
        ("CACHE_URL", "memcached://127.0.0.1:1"),
        ("WORKER_HEARTBEAT_SECONDS", "soon"),
        ("WORKER_HEARTBEAT_SECONDS", "0"),
        ("ALLOWED_HOSTS", "toolscope.example.com,,localhost"),
        ("CSRF_TRUSTED_ORIGINS", "toolscope.example.com"),
    ],
)
def test_malformed_values_fail_naming_the_variable(tmp_path, toolscope_env, variable, value):
    env = {**PRODUCTION, "TOOLSCOPE_ENV": toolscope_env}
    if toolscope_env == "development":
        env["DEBUG"] = UNSET  # development's own default
    env[variable] = value
    assert variable in refusal(manage_check(env, tmp_path))


def test_unknown_toolscope_env_fails_naming_the_variable(tmp_path):
    assert "TOOLSCOPE_ENV" in refusal(manage_check({**PRODUCTION, "TOOLSCOPE_ENV": "prod"}, tmp_path))


def _cache_prefix(env: dict[str, str | None], tmp_path) -> str:
    clean = {"PATH": f"{recipe.VENV_BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    clean.update({key: value for key, value in env.items() if value is not None})
    done = subprocess.run(
        ["python", "-c", "from toolscope import settings; print(settings.CACHES['default']['KEY_PREFIX'])"],
        cwd=recipe.REPO_ROOT, env=clean, capture_output=True, text=True, timeout=60, check=True,
    )
    return done.stdout.strip()


def test_two_databases_sharing_one_redis_never_share_cache_entries(tmp_path):
    first = _cache_prefix(PRODUCTION, tmp_path)
    again = _cache_prefix(PRODUCTION, tmp_path)
    other = _cache_prefix({**PRODUCTION, "DATABASE_URL": "postgres://toolscope@127.0.0.1:1/other"}, tmp_path)
    assert first == again != other
    assert first.startswith("toolscope:")
