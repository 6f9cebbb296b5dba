"""The production recipe says what the deployment needs, checked without Docker.

Dockerfile: python:3.11-slim, the runtime requirements installed with their hashes and the SDK as a package, static
files collected at build time (and that step really works with the production settings and
nothing else running), a non-root user, port 8000. docker-compose.yml: healthy PostgreSQL and
Redis with persistent volumes before any toolscope process starts, one strict environment for
all of them, and a .env.example that names every value the file takes from outside.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.deploy import recipe

TEST_VARIABLES = {"SECRET_KEY": "s" * 50, "POSTGRES_PASSWORD": "test-password"}


@pytest.fixture(scope="module")
def compose():
    return recipe.load_compose(TEST_VARIABLES)


# --- Dockerfile -------------------------------------------------------------------------------


def test_dockerfile_builds_on_python_311_slim_and_runs_as_a_non_root_user():
    instructions = recipe.dockerfile_instructions()
    assert instructions[0] == ("FROM", "python:3.11-slim")
    keywords = [keyword for keyword, _ in instructions]
    users = [arguments for keyword, arguments in instructions if keyword == "USER"]
    assert users, "the image must switch to a non-root user"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    # Nothing after the last USER runs as root again.
    assert keywords.index("USER") > max(i for i, keyword in enumerate(keywords) if keyword == "RUN")
    assert ("EXPOSE", "8000") in instructions


def test_dockerfile_installs_the_sdk_with_the_requirements():
    instructions = recipe.dockerfile_instructions()
    install = next(
        i
        for i, (keyword, arguments) in enumerate(instructions)
        if keyword == "RUN" and "pip install" in arguments and "-r requirements.txt" in arguments
    )
    copied_before = " ".join(arguments for keyword, arguments in instructions[:install] if keyword == "COPY")
    assert "requirements.txt" in copied_before and "sdk/ ./sdk/" in copied_before
    command = instructions[install][1]
    # The runtime only, every pin hashed; the SDK as a package, not editable.
    assert "--require-hashes -r requirements.txt" in command and "pip install --no-deps ./sdk" in command
    assert "requirements-dev.txt" not in command and "-e ./sdk" not in command


def test_the_runtime_requirements_hold_no_development_tool_and_every_pin_is_hashed():
    runtime = (recipe.REPO_ROOT / "requirements.txt").read_text()
    pins = [line.split("==")[0] for line in runtime.splitlines() if "==" in line and not line.startswith(" ")]
    assert pins and all(f"{name}==" in runtime for name in ("django", "celery", "granian", "opentelemetry-proto"))
    for tool in ("pytest", "playwright", "mypy", "ruff", "schemathesis", "hypothesis", "import-linter", "uv"):
        assert tool not in pins, tool
    blocks = runtime.split("\n")
    for index, line in enumerate(blocks):
        if "==" in line and not line.startswith(" "):
            assert blocks[index].endswith("\\") and "--hash=sha256:" in blocks[index + 1], line
    development = (recipe.REPO_ROOT / "requirements-dev.txt").read_text()
    assert "pytest==" in development and "--hash=sha256:" in development


def test_dockerfile_default_command_is_granian_on_the_port_from_the_environment():
    cmd = [arguments for keyword, arguments in recipe.dockerfile_instructions() if keyword == "CMD"][-1]
    argv = json.loads(cmd)
    assert argv[:2] == ["sh", "-c"]
    script = argv[2]
    assert script.startswith("exec granian --interface wsgi ")
    assert script.endswith(" toolscope.wsgi:application")
    assert '--port "$PORT"' in script
    assert ":8000" not in script and "--host" not in script
    env = recipe.dockerfile_env()
    assert (env["PORT"], env["GRANIAN_HOST"]) == ("8000", "0.0.0.0")  # noqa: S104 - inside the container


def test_build_context_leaves_out_local_state_and_secrets():
    patterns = recipe.dockerignore_patterns()
    for path in (
        ".git/HEAD",
        ".venv/bin/python",
        ".env",
        "toolscope.sqlite3",
        "staticfiles/x.css",
        "toolscope/__pycache__/settings.cpython-311.pyc",
        "sdk/toolscope_agent.egg-info/PKG-INFO",
        "tests/conftest.py",
        ".hypothesis/examples/x",
        "celerybeat-schedule",
    ):
        assert recipe.is_ignored(path, patterns), path
    for path in (
        "manage.py",
        "requirements.txt",
        "toolscope/settings.py",
        "sdk/pyproject.toml",
        "sdk/toolscope_agent/__init__.py",
        "workers/tasks.py",
    ):
        assert not recipe.is_ignored(path, patterns), path


@pytest.mark.slow
def test_collectstatic_step_of_the_build_works_in_the_build_context(tmp_path):
    """Runs the Dockerfile's collectstatic RUN in a copy of the build context: production
    settings, the variables the RUN sets and nothing else; no database or broker is reachable."""
    runs = [
        arguments
        for keyword, arguments in recipe.dockerfile_instructions()
        if keyword == "RUN" and "collectstatic" in arguments
    ]
    assert len(runs) == 1
    run_env, argv = recipe.split_run(runs[0])
    assert run_env.get("TOOLSCOPE_ENV") == "production"
    assert not {"&&", "||", ";", "|"} & set(argv), "keep the collectstatic RUN a single command"

    context = recipe.copy_build_context(tmp_path / "app")
    assert not (context / ".venv").exists()
    assert not (context / "tests").exists()
    env = {
        **recipe.dockerfile_env(),
        **run_env,
        "PATH": f"{recipe.VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
    }
    result = subprocess.run(argv, cwd=context, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]

    manifest = json.loads((context / "staticfiles" / "staticfiles.json").read_text())
    hashed = manifest["paths"]["admin/css/base.css"]
    assert hashed != "admin/css/base.css"
    assert (context / "staticfiles" / hashed).is_file()
    assert (context / "staticfiles" / (hashed + ".gz")).is_file()


# --- docker-compose.yml -----------------------------------------------------------------------


def test_compose_refuses_to_start_without_the_secrets():
    with pytest.raises(recipe.InterpolationError, match="SECRET_KEY"):
        recipe.load_compose({"POSTGRES_PASSWORD": "test-password"})
    with pytest.raises(recipe.InterpolationError, match="SECRET_KEY"):
        recipe.load_compose({"POSTGRES_PASSWORD": "test-password", "SECRET_KEY": ""})
    with pytest.raises(recipe.InterpolationError, match="POSTGRES_PASSWORD"):
        recipe.load_compose({"SECRET_KEY": "s" * 50})


def test_postgres_and_redis_are_healthchecked_and_persistent(compose):
    services, volumes = compose["services"], compose["volumes"]

    postgres = services["postgres"]
    assert postgres["image"] == "postgres:16"
    assert "pg_isready" in recipe.as_argv(postgres["healthcheck"]["test"])
    assert any(v.endswith(":/var/lib/postgresql/data") and v.split(":")[0] in volumes for v in postgres["volumes"])

    redis = services["redis"]
    assert redis["image"] == "redis:7"
    command = recipe.as_argv(redis["command"])
    assert command[command.index("--appendonly") + 1] == "yes"
    assert "redis-cli ping" in " ".join(recipe.as_argv(redis["healthcheck"]["test"]))
    assert any(v.endswith(":/data") and v.split(":")[0] in volumes for v in redis["volumes"])


def test_toolscope_services_share_one_strict_production_environment(compose):
    services = compose["services"]
    environments = {name: recipe.service_environment(services[name]) for name in recipe.APP_SERVICES}
    shared = (
        "TOOLSCOPE_ENV",
        "DEBUG",
        "SECRET_KEY",
        "DATABASE_URL",
        "CELERY_BROKER_URL",
        "CELERY_RESULT_BACKEND",
        "CACHE_URL",
        "ALLOWED_HOSTS",
        "CSRF_TRUSTED_ORIGINS",
    )
    for name, env in environments.items():
        assert env["TOOLSCOPE_ENV"] == "production", name
        assert env["DEBUG"] == "false", name
        assert env["SECRET_KEY"] == TEST_VARIABLES["SECRET_KEY"], name
        assert env["DATABASE_URL"] == "postgres://toolscope:test-password@postgres:5432/toolscope", name
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0", name
        assert env["CELERY_RESULT_BACKEND"] == "redis://redis:6379/1", name
        assert env["CACHE_URL"] == "redis://redis:6379/2", name
        assert {key: env[key] for key in shared} == {key: environments["web"][key] for key in shared}


def test_toolscope_services_start_after_healthy_dependencies(compose):
    services = compose["services"]
    for name in ("migrate", "web", "worker"):
        depends = services[name]["depends_on"]
        for dependency in ("postgres", "redis"):
            assert depends[dependency]["condition"] == "service_healthy", (name, dependency)
    assert services["beat"]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_migrations_run_once_in_their_own_service_before_web_and_worker(compose):
    services = compose["services"]
    assert recipe.as_argv(services["migrate"]["command"]) == ["python", "manage.py", "migrate", "--noinput"]
    assert services["migrate"]["restart"] == "no"  # a one-shot: done, not restarted
    for name in ("web", "worker"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
        assert "migrate" not in " ".join(recipe.as_argv(services[name]["command"])), name


def test_web_serves_on_the_port_and_concurrency_from_the_environment(compose):
    web = compose["services"]["web"]
    script = " ".join(recipe.as_argv(web["command"]))
    assert "sh -c exec granian --interface wsgi" in script
    assert script.endswith(" toolscope.wsgi:application")
    assert '--port "$PORT"' in script
    assert '--workers "$WEB_CONCURRENCY"' in script
    assert "--respawn-failed-workers" in script  # a worker that dies is started again
    assert ":8000" not in script and "--host" not in script
    env = recipe.service_environment(web)
    assert env["PORT"] == "8000"
    assert int(env["WEB_CONCURRENCY"]) >= 1
    assert env["GRANIAN_LOG_ACCESS_ENABLED"] in ("true", "false")
    assert "/readyz" in " ".join(recipe.as_argv(web["healthcheck"]["test"]))
    assert any(str(port).endswith(":8000") for port in web["ports"])


def test_worker_simulator_and_beat_commands(compose):
    worker = recipe.as_argv(compose["services"]["worker"]["command"])
    assert worker[:4] == ["celery", "-A", "toolscope", "worker"]
    assert int(worker[worker.index("--concurrency") + 1]) >= 1
    assert worker[worker.index("--queues") + 1] == "celery"
    # Replays and recommendations run apart from ingest, on the queue every service sends them to.
    simulator = recipe.as_argv(compose["services"]["simulator"]["command"])
    assert simulator[:4] == ["celery", "-A", "toolscope", "worker"]
    queue = recipe.service_environment(compose["services"]["web"])["SIMULATION_QUEUE"]
    assert simulator[simulator.index("--queues") + 1] == queue != "celery"
    assert compose["services"]["simulator"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    beat = recipe.as_argv(compose["services"]["beat"]["command"])
    assert beat[:4] == ["celery", "-A", "toolscope", "beat"]
    # The image's user can write only to its home and /tmp.
    assert beat[beat.index("--schedule") + 1].startswith("/tmp/")


def test_env_example_names_every_variable_compose_takes():
    lines = [
        line
        for line in recipe.ENV_EXAMPLE.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    example = dict(line.split("=", 1) for line in lines)
    assert recipe.referenced_variables() <= set(example), recipe.referenced_variables() - set(example)
    # The secrets are left for the operator to fill in; compose refuses them empty.
    assert example["SECRET_KEY"] == ""
    assert example["POSTGRES_PASSWORD"] == ""
    # Everything else in the example is a value the stack accepts as it is.
    filled = {key: value for key, value in example.items() if value}
    recipe.load_compose({**filled, **TEST_VARIABLES})


def test_the_proxy_service_runs_toolscope_proxy_from_the_image_on_request(compose):
    """toolscope-proxy (docs/proxy.md) is in the image (its starlette and uvicorn are runtime pins)
    and starts only with `--profile proxy`; tests/proxy/test_proxy_live.py runs its command."""
    proxy = compose["services"]["proxy"]
    assert proxy["profiles"] == ["proxy"] and proxy["image"] == compose["services"]["web"]["image"]
    argv = recipe.as_argv(proxy["command"])
    assert argv[0] == "toolscope-proxy" and argv[argv.index("--spool-dir") + 1] == "/var/lib/toolscope-proxy"
    assert any(volume.endswith(":/var/lib/toolscope-proxy") for volume in proxy["volumes"])
    env = recipe.service_environment(proxy)
    assert env["TOOLSCOPE_URL"] == "http://web:8000" and env["TOOLSCOPE_PROXY_MODE"] == "observe"
    assert proxy["ports"] == ["127.0.0.1:8788:8788"]
    pins = (recipe.REPO_ROOT / "requirements.txt").read_text()
    assert "\nstarlette==" in pins and "\nuvicorn==" in pins
