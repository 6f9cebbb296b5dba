"""What `./scripts/demo` installs is enough to run the service (issue 28, item 9).

The demo installs the runtime only (`./scripts/bootstrap --runtime`): requirements.txt, the SDK
(./sdk) and requirements-model.txt, never requirements-dev.txt. So every module the service's code
imports must come from a distribution pinned in one of those two files: a new runtime import of a
development-only package (pytest, hypothesis, openai, ...) fails here, not on someone's first run.

The imports are read from the source with `ast` (no Django, no database: a second or two): every
`import` and `from ... import` of toolscope/, api/, dashboard/, workers/ and sdk/toolscope_agent/,
`importlib.import_module("...")` calls, and the dotted paths of toolscope/settings.py that Django
imports by name (INSTALLED_APPS, MIDDLEWARE, backends). Imports under `if TYPE_CHECKING:` are not
run and are skipped. Each module is traced to the distribution that installed its file in this
(development) environment. The SDK's MCP gateway is left out: an agent-side extra (`toolscope-mcp`,
`pip install ./sdk[gateway]`) that the service never imports, which a test below holds.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Each root, with the directory its top-level package is found in (the SDK is installed from ./sdk).
RUNTIME_ROOTS = {"toolscope": ROOT, "api": ROOT, "dashboard": ROOT, "workers": ROOT,
                 "toolscope_agent": ROOT / "sdk"}
NOT_SERVICE = ("toolscope_agent.gateway",)
SETTINGS = ROOT / "toolscope" / "settings.py"
DEMO_REQUIREMENTS = (ROOT / "requirements.txt", ROOT / "requirements-model.txt")
# Not imported by name anywhere, but what the service runs on: the production web server (the
# image's CMD) and the drivers behind DATABASE_URL=postgres:// and redis:// broker and cache URLs.
RUN_NOT_IMPORTED = ("granian", "psycopg", "redis")

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")
_DOTTED = re.compile(r"^[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, str]:
    """{distribution: version} of a pip requirements file's `name==version` lines."""
    found = {}
    for line in text.splitlines():
        match = _PIN.match(line)
        if match:
            found[canonical(match.group(1))] = match.group(2)
    return found


def _module_of(path: Path, base: Path) -> tuple[str, str]:
    """(module, package) of a source file under `base`."""
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = {"ImportError", "ModuleNotFoundError", "Exception"}
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.type is None or any(isinstance(k, ast.Name) and k.id in names for k in kinds)


def imports_of(source: str, *, module: str, package: str, dotted_strings: bool = False) -> Iterator[tuple[str, bool]]:
    """(absolute module name, optional) of each import one file runs; optional: inside a `try`
    that catches ImportError. Relative imports are made absolute."""

    def visit(nodes: Iterable[ast.AST], optional: bool) -> Iterator[tuple[str, bool]]:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from visit(node.orelse, optional)
                continue
            if isinstance(node, ast.Try | ast.TryStar):
                guarded = optional or any(_catches_import_error(h) for h in node.handlers)
                yield from visit(node.body, guarded)
                for rest in (node.handlers, node.orelse, node.finalbody):
                    yield from visit(rest, optional)
                continue
            if isinstance(node, ast.Import):
                yield from ((alias.name, optional) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    name = f"{base}.{node.module}" if node.module else base
                else:
                    name = node.module or ""
                yield name, optional
                # `from pkg import sub` may import a submodule: name it too (first-party checks).
                yield from ((f"{name}.{alias.name}", optional) for alias in node.names if alias.name != "*")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
                  and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
                  and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                yield node.args[0].value, optional
            elif dotted_strings and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and _DOTTED.match(node.value):
                yield node.value, True  # a string may be no module at all ("logging.StreamHandler" is)
            elif dotted_strings and isinstance(node, ast.Assign) and any(
                    isinstance(target, ast.Name) and target.id == "INSTALLED_APPS" for target in node.targets):
                # Apps are modules, dotted or not ("axes").
                yield from ((n.value, False) for n in ast.walk(node.value)
                            if isinstance(n, ast.Constant) and isinstance(n.value, str))
            yield from visit(ast.iter_child_nodes(node), optional)

    yield from visit(ast.parse(source).body, False)


def runtime_imports(roots: dict[str, Path], *, excluded: tuple[str, ...] = NOT_SERVICE,
                    settings: Path | None = SETTINGS) -> dict[tuple[str, bool], set[str]]:
    """{(module, optional): files importing it} over the service's packages, `excluded` left out."""
    found: dict[tuple[str, bool], set[str]] = defaultdict(set)
    for top, base in roots.items():
        for path in sorted((base / top).rglob("*.py")):
            module, package = _module_of(path, base)
            if any(module == e or module.startswith(e + ".") for e in excluded):
                continue
            source = path.read_text(encoding="utf-8")
            for name, optional in imports_of(source, module=module, package=package,
                                              dotted_strings=path == settings):
                found[(name, optional)].add(str(path.relative_to(base.parent if top == "toolscope_agent" else base)))
    return found


@cache
def _files_to_distributions() -> dict[str, str]:
    index = {}
    for dist in importlib.metadata.distributions():
        base, name = str(dist.locate_file("")), canonical(dist.metadata["Name"])
        for file in dist.files or ():
            if file.suffix in (".py", ".so", ".pyd"):
                index[os.path.normpath(os.path.join(base, str(file)))] = name
    return index


def distribution_of(module: str) -> str | None:
    """The installed distribution whose files hold `module`'s top-level package (for a namespace
    package such as google.*, its first regular package or module); None if it is not installed."""
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        # Imported already: its file (Celery and kombu replace some of their modules, spec and all).
        origin = getattr(sys.modules.get(name), "__file__", None)
        if origin is None:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                return None
            if spec is None:
                return None
            origin = spec.origin if spec.origin != "namespace" else None
        if origin is not None:
            return _files_to_distributions().get(os.path.normpath(origin))
    return None


def unpinned_imports(roots: dict[str, Path], requirement_texts: Iterable[str], *,
                     settings: Path | None = SETTINGS) -> dict[str, list[str]]:
    """{what is wrong: files} for each import the service runs that the pinned files do not install."""
    allowed = set().union(*(pins(text) for text in requirement_texts))
    first_party = set(roots)
    problems: dict[str, set[str]] = defaultdict(set)
    for (module, optional), files in runtime_imports(roots, settings=settings).items():
        top = module.split(".")[0]
        if not top or top in sys.stdlib_module_names or top in first_party or top == "__future__":
            continue
        dist = distribution_of(module)
        if dist is None:
            if not optional:
                problems[f"{top}: not installed at all"] |= files
        elif dist not in allowed:
            problems[f"{top}: from {dist}, which the demo does not install"] |= files
    return {problem: sorted(files) for problem, files in sorted(problems.items())}


def _demo_requirement_texts() -> list[str]:
    return [path.read_text(encoding="utf-8") for path in DEMO_REQUIREMENTS]


def test_every_runtime_import_is_pinned_in_what_the_demo_installs():
    assert unpinned_imports(RUNTIME_ROOTS, _demo_requirement_texts()) == {}


def test_the_scan_sees_the_service_s_real_imports():
    """The scan is not vacuous: it finds the imports the service is built on, settings strings included."""
    names = {module.split(".")[0] for module, _ in runtime_imports(RUNTIME_ROOTS)}
    assert {"django", "rest_framework", "celery", "orjson", "numpy", "scipy", "tokenizers", "google",
            "axes", "whitenoise", "drf_spectacular_sidecar", "bpe_openai"} <= names
    assert "mcp" not in names  # the gateway's, left out


def test_a_development_only_import_fails(tmp_path):
    package = tmp_path / "toolscope"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "views.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import django\n"
        "from hypothesis import strategies\n"
        "if TYPE_CHECKING:\n"
        "    import mypy  # not run: fine\n"
        "try:\n"
        "    import not_a_real_module_at_all  # optional and absent: fine\n"
        "except ImportError:\n"
        "    pass\n"
        "def later():\n"
        "    import pytest\n"
        "    return importlib.import_module('openai')\n")
    problems = unpinned_imports({"toolscope": tmp_path}, _demo_requirement_texts(), settings=None)
    assert sorted(problems) == [
        "hypothesis: from hypothesis, which the demo does not install",
        "openai: from openai, which the demo does not install",
        "pytest: from pytest, which the demo does not install",
    ]
    assert problems["pytest: from pytest, which the demo does not install"] == ["toolscope/views.py"]


def test_a_runtime_pin_dropped_from_requirements_fails():
    runtime, model = _demo_requirement_texts()
    without_orjson = "\n".join(line for line in runtime.splitlines() if not line.startswith("orjson=="))
    without_tokenizers = "\n".join(line for line in model.splitlines() if not line.startswith("tokenizers=="))
    problems = unpinned_imports(RUNTIME_ROOTS, [without_orjson, without_tokenizers])
    assert sorted(problems) == ["orjson: from orjson, which the demo does not install",
                                "tokenizers: from tokenizers, which the demo does not install"]


def test_the_service_never_imports_the_gateway():
    """The gateway may import what the service does not install only because nothing else imports it."""
    importers = {file for (module, _), files in runtime_imports(RUNTIME_ROOTS).items()
                 if any(module == e or module.startswith(e + ".") for e in NOT_SERVICE) for file in files}
    assert importers == set()


def test_the_runtime_pins_are_the_development_pins_and_the_service_s_drivers():
    """A full bootstrap after the demo's only adds packages: requirements-dev.txt pins every
    runtime and model package at the same version (scripts/lock compiles it within requirements.txt)."""
    runtime = pins((ROOT / "requirements.txt").read_text(encoding="utf-8"))
    development = pins((ROOT / "requirements-dev.txt").read_text(encoding="utf-8"))
    assert {name: (version, development.get(name)) for name, version in runtime.items()
            if development.get(name) != version} == {}
    model = pins((ROOT / "requirements-model.txt").read_text(encoding="utf-8"))
    assert {name for name in model if name in development and development[name] != model[name]} == set()
    assert set(RUN_NOT_IMPORTED) <= set(runtime)


def test_the_demo_installs_the_runtime_and_nothing_for_development():
    demo = (ROOT / "scripts" / "demo").read_text(encoding="utf-8")
    assert "./scripts/bootstrap --runtime" in demo
    assert "requirements-dev" not in demo
