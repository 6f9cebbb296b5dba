"""Reads the production recipe (Dockerfile, .dockerignore, docker-compose.yml) the way Docker does.

Docker is not needed: the tests take the commands and environments that the recipe gives each
container and run them as local processes against a local PostgreSQL and Redis.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
ENV_EXAMPLE = REPO_ROOT / ".env.example"
VENV_BIN = REPO_ROOT / ".venv" / "bin"

# In start order: migrate is a one-shot that must finish before the others start.
APP_SERVICES = ("migrate", "web", "worker", "simulator", "beat")


class InterpolationError(ValueError):
    """A `${VAR:?message}` whose variable is missing: compose refuses to start."""


# --- docker-compose.yml -----------------------------------------------------------------------

_DOLLAR = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?", re.DOTALL)


def interpolate(text: str, variables: Mapping[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?err}`, `${VAR?err}`,
    `${VAR:+alt}`, `${VAR+alt}`, `$VAR` and `$$`."""

    def replace(match: re.Match[str]) -> str:
        if match.group("escaped"):
            return "$"
        if match.group("named"):
            return variables.get(match.group("named"), "")
        braced = _BRACED.fullmatch(match.group("braced"))
        if braced is None:
            raise InterpolationError(f"invalid interpolation {match.group(0)!r}")
        name, op, arg = braced.group("name"), braced.group("op"), braced.group("arg") or ""
        value = variables.get(name)
        is_set, is_nonempty = value is not None, bool(value)
        if op is None:
            return value or ""
        if op == ":-":
            return value if is_nonempty else arg
        if op == "-":
            return value if is_set else arg
        if op == ":+":
            return arg if is_nonempty else ""
        if op == "+":
            return arg if is_set else ""
        if (op == ":?" and not is_nonempty) or (op == "?" and not is_set):
            raise InterpolationError(f"{name}: {arg}")
        return value

    return _DOLLAR.sub(replace, text)


def _interpolate_tree(node: Any, variables: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, variables)
    if isinstance(node, list):
        return [_interpolate_tree(item, variables) for item in node]
    if isinstance(node, dict):
        return {key: _interpolate_tree(value, variables) for key, value in node.items()}
    return node


def raw_compose() -> dict[str, Any]:
    """docker-compose.yml as YAML, anchors and merge keys resolved, `${...}` left as written."""
    return yaml.safe_load(COMPOSE_FILE.read_text())


def load_compose(variables: Mapping[str, str]) -> dict[str, Any]:
    """docker-compose.yml as compose sees it with `variables` as the shell environment / .env."""
    return _interpolate_tree(raw_compose(), variables)


def referenced_variables() -> set[str]:
    """Every variable that docker-compose.yml interpolates."""
    names = set()
    for match in _DOLLAR.finditer(COMPOSE_FILE.read_text()):
        if match.group("named"):
            names.add(match.group("named"))
        elif match.group("braced") is not None:
            braced = _BRACED.fullmatch(match.group("braced"))
            if braced:
                names.add(braced.group("name"))
    return names


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def service_environment(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's `environment`, in either the mapping or the list form."""
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        pairs = (item.split("=", 1) if "=" in item else (item, None) for item in environment)
        environment = dict(pairs)
    # A name without a value takes the value from compose's own environment; the recipe has none.
    return {key: _scalar(value) for key, value in environment.items() if value is not None}


def as_argv(command: str | list[Any]) -> list[str]:
    """A compose `command` or healthcheck `test` as the argument vector the container runs."""
    if isinstance(command, str):
        return shlex.split(command)
    return [_scalar(item) for item in command]


def healthcheck_argv(service: Mapping[str, Any]) -> list[str]:
    test = as_argv(service["healthcheck"]["test"])
    kind, rest = test[0], test[1:]
    if kind == "CMD":
        return rest
    if kind == "CMD-SHELL":
        return ["/bin/sh", "-c", " ".join(rest)]
    raise AssertionError(f"unsupported healthcheck form {kind!r}")


# --- Dockerfile -------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per logical line: continuations joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical = pending + stripped
        pending = ""
        keyword, _, arguments = logical.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def dockerfile_env() -> dict[str, str]:
    """The environment that the image's ENV instructions give every container."""
    env: dict[str, str] = {}
    for keyword, arguments in dockerfile_instructions():
        if keyword != "ENV":
            continue
        words = shlex.split(arguments)
        if "=" not in words[0]:  # legacy `ENV NAME value`
            env[words[0]] = " ".join(words[1:])
            continue
        for word in words:
            name, _, value = word.partition("=")
            env[name] = value
    return env


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def split_run(arguments: str) -> tuple[dict[str, str], list[str]]:
    """`RUN A=1 B=2 cmd args` as ({A: 1, B: 2}, [cmd, args])."""
    words = shlex.split(arguments)
    env: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


# --- .dockerignore ----------------------------------------------------------------------------


def dockerignore_patterns() -> list[str]:
    patterns = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            assert not line.startswith("!"), "exceptions are not modelled by this reader"
            patterns.append(line.strip("/"))
    return patterns


def _matches(pattern: str, path: str) -> bool:
    if pattern.startswith("**/"):
        parts = path.split("/")
        return any(fnmatch.fnmatchcase("/".join(parts[i:]), pattern[3:]) for i in range(len(parts)))
    return fnmatch.fnmatchcase(path, pattern)


def is_ignored(relative_path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves `relative_path` (or a folder above it) out of the build context."""
    parts = relative_path.split("/")
    return any(_matches(pattern, "/".join(parts[:depth])) for depth in range(1, len(parts) + 1) for pattern in patterns)


def copy_build_context(destination: Path) -> Path:
    """Copies the repository as `docker build .` would send it, .dockerignore applied."""
    patterns = dockerignore_patterns()

    def ignore(directory: str, names: list[str]) -> set[str]:
        base = Path(directory).relative_to(REPO_ROOT).as_posix()
        prefix = "" if base == "." else base + "/"
        return {name for name in names if is_ignored(prefix + name, patterns)}

    shutil.copytree(REPO_ROOT, destination, ignore=ignore, symlinks=True)
    return destination
