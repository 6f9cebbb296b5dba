"""Shell and test outputs: the long, repetitive logs that dominate a coding agent's context."""

from __future__ import annotations

import random
import re

from toolscope.telemetry.demo import repo

_HEADER = (
    "============================= test session starts ==============================\n"
    "platform linux -- Python 3.12.7, pytest-8.3.3, pluggy-1.5.0\n"
    "django: version: 5.1.4, settings: shopfront.settings.test (from ini)\n"
    f"rootdir: {repo.ROOT}\nconfigfile: pyproject.toml\n"
    "plugins: django-4.9.0, cov-6.0.0, xdist-3.6.1, anyio-4.6.2\n"
)
_PARAMS = ("de", "fr", "at", "nl", "gb")
_PACKAGES = (
    ("Django", "5.1.4", 8.3), ("djangorestframework", "3.15.2", 1.1), ("celery", "5.4.0", 0.4),
    ("kombu", "5.4.2", 0.2), ("redis", "5.2.1", 0.3), ("stripe", "11.3.0", 1.6), ("psycopg", "3.2.3", 0.2),
    ("psycopg-binary", "3.2.3", 4.4), ("pytest", "8.3.3", 0.3), ("pytest-django", "4.9.0", 0.02),
    ("factory-boy", "3.3.1", 0.04), ("Faker", "33.1.0", 1.9), ("ruff", "0.8.2", 10.9),
    ("mypy", "1.13.0", 12.8), ("django-stubs", "5.1.1", 0.5), ("asgiref", "3.8.1", 0.02),
    ("sqlparse", "0.5.2", 0.04), ("billiard", "4.2.1", 0.09), ("vine", "5.1.0", 0.01),
    ("click", "8.1.7", 0.1), ("requests", "2.32.3", 0.06), ("urllib3", "2.2.3", 0.1),
)


def collected_ids(target: str = "") -> list[str]:
    """Every collected test id under `target`, parametrized like the real suite."""
    ids: list[str] = []
    for path in repo.ALL_PATHS:
        if not path.startswith("tests/") or (target and not path.startswith(target.split("::")[0])):
            continue
        for name in repo.symbols(path):
            params = _PARAMS if "billing" in path or "shipping" in path else ("",)
            ids.extend(f"{path}::{name}" + (f"[{p}]" if p else "") for p in params)
    return ids


def pytest_report(rng: random.Random, *, target: str = "", failing: int = 0, verbose: bool = False) -> str:
    ids = collected_ids(target)
    failed = set(rng.sample(ids, min(failing, len(ids))))
    lines = [_HEADER + f"collected {len(ids)} items\n"]
    if verbose:
        lines += [f"{tid} {'FAILED' if tid in failed else 'PASSED'} [{100 * (n + 1) // len(ids):3d}%]"
                  for n, tid in enumerate(ids)]
    else:
        lines += _progress_lines(ids, failed)
    lines.append(_warnings(rng))
    if failed:
        lines.append("=" * 35 + " FAILURES " + "=" * 35)
        lines += [_failure(tid) for tid in sorted(failed)]
        lines.append("=" * 27 + " short test summary info " + "=" * 28)
        lines += [f"FAILED {tid} - AssertionError: assert 'paid' == '{_expected(tid)}'" for tid in sorted(failed)]
    seconds = round(len(ids) * rng.uniform(0.04, 0.09), 2)
    summary = f"{len(failed)} failed, {len(ids) - len(failed)} passed" if failed else f"{len(ids)} passed"
    lines.append(f"{'=' * 20} {summary}, 12 warnings in {seconds}s {'=' * 20}")
    return "\n".join(lines)


def _progress_lines(ids: list[str], failed: set[str]) -> list[str]:
    by_file: dict[str, str] = {}
    for tid in ids:
        path = tid.split("::")[0]
        by_file[path] = by_file.get(path, "") + ("F" if tid in failed else ".")
    done, lines = 0, []
    for path, marks in by_file.items():
        done += len(marks)
        lines.append(f"{path} {marks:<40} [{100 * done // len(ids):3d}%]")
    return lines


def _warnings(rng: random.Random) -> str:
    where = rng.choice([p for p in repo.SOURCE_FILES if p.startswith("src/")])
    return (
        "=============================== warnings summary ===============================\n"
        f"{where.removeprefix('src/')}:12\n  RemovedInDjango60Warning: The default scheme will be changed "
        "from 'http' to 'https' in Django 6.0. Pass the forms.URLField.assume_scheme argument to silence "
        "this warning.\n\n"
        ".venv/lib/python3.12/site-packages/celery/app/base.py:1019\n  DeprecationWarning: "
        "datetime.datetime.utcnow() is deprecated and scheduled for removal in a future version.\n\n"
        "-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html"
    )


def _expected(tid: str) -> str:
    return repo.PAST[tid.split("::test_")[1].split("_")[0]]


def _failure(tid: str) -> str:
    path, name = tid.split("::")
    text = repo.file_text(path)
    body = re.search(rf"@pytest.mark.django_db\ndef {re.escape(name.split('[')[0])}\(.*?(?:\n\n|\Z)", text, re.DOTALL)
    if body is None:
        return f"{'_' * 20} {name} {'_' * 20}\nE       AssertionError"
    # pytest prints the test up to the failing assert, the penultimate line of every demo test.
    source = body.group(0).strip().splitlines()[:-1]
    shown = "\n".join(("    " if n != len(source) - 1 else ">   ") + line for n, line in enumerate(source))
    entity, expected = name.split("_")[2], _expected(tid)
    return (
        f"{'_' * 20} {name} {'_' * 20}\n\n"
        f"{entity}_factory = <function {entity}_factory at 0x7f3a2c1e0d30>, staff_user = <User: staff>\n\n"
        f"{shown}\nE       AssertionError: assert 'paid' == '{expected}'\nE         \n"
        f"E         - {expected}\nE         + paid\n\n"
        f"{path}:{text[: body.start()].count(chr(10)) + len(source)}: AssertionError\n"
        "------------------------------ Captured log call -------------------------------\n"
        f"INFO     shopfront.{entity}s:services.py:35 status change rejected: row locked by another transaction"
    )


def pip_install_log(rng: random.Random) -> str:
    lines = [f"Obtaining file://{repo.ROOT}", "  Installing build dependencies ... done",
             "  Checking if build backend supports build_editable ... done"]
    for name, version, size in _PACKAGES:
        lines += [f"Collecting {name.lower()}=={version}",
                  f"  Downloading {name.replace('-', '_')}-{version}-py3-none-any.whl ({size} MB)",
                  (f"     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ {size}/{size} MB "
                  f"{rng.uniform(8, 60):.1f} MB/s eta 0:00:00")]
    names = " ".join(f"{name}-{version}" for name, version, _ in _PACKAGES)
    lines += ["Building wheels for collected packages: shopfront", ("  Building editable for shopfront "
              "(pyproject.toml) ... done"), f"Successfully installed {names} shopfront-2.14.0"]
    return "\n".join(lines)


def docker_build_log(rng: random.Random) -> str:
    steps = ["FROM docker.io/library/python:3.12-slim", "RUN apt-get update && apt-get install -y libpq5",
             "COPY requirements.txt .", "RUN pip install --no-cache-dir -r requirements.txt", "COPY . .",
             "RUN python manage.py collectstatic --noinput"]
    lines = ["#0 building with \"default\" instance using docker driver", ("#1 [web internal] load build "
             "definition from Dockerfile"), "#1 transferring dockerfile: 612B done", "#1 DONE 0.0s"]
    for n, step in enumerate(steps, start=2):
        lines.append(f"#{n} [web {n - 1}/{len(steps)}] {step}")
        if "pip install" in step:
            lines += [f"#{n} {rng.uniform(2, 30):.3f} {line}" for line in pip_install_log(rng).splitlines()]
        lines.append(f"#{n} DONE {rng.uniform(0.1, 40):.1f}s")
    lines.append("#9 exporting to image\n#9 writing image sha256:4f9a0c7d2e done\n#9 naming to "
                 "docker.io/library/shopfront-web done\n#9 DONE 2.3s")
    return "\n".join(lines)


def ruff_log(rng: random.Random) -> str:
    codes = [("F401", "`decimal.ROUND_HALF_UP` imported but unused"), ("E501", "Line too long (108 > 100)"),
             ("B008", "Do not perform function call in argument defaults"),
             ("SIM108", "Use ternary operator instead of `if`-`else`-block")]
    findings = [f"{path}:{rng.randint(5, 60)}:{rng.randint(1, 40)}: {code} {msg}"
                for path in rng.sample(sorted(repo.SOURCE_FILES), 4) for code, msg in rng.sample(codes, 2)]
    return "\n".join(findings) + f"\nFound {len(findings)} errors.\n[*] 3 fixable with the `--fix` option."


def mypy_log(rng: random.Random) -> str:
    paths = rng.sample([p for p in repo.SOURCE_FILES if p.startswith("src/")], 3)
    errors = [f'{p}:{rng.randint(10, 50)}: error: Name "{n}" is not defined  [name-defined]'
              for p, n in zip(paths, ("LineItem", "User", "VAT_RATES"), strict=True)]
    return "\n".join(errors) + f"\nFound 3 errors in 3 files (checked {len(repo.SOURCE_FILES)} source files)"


def migrate_log() -> str:
    apps = ("accounts", "catalog", "orders", "billing", "shipping")
    return "Operations to perform:\n  Apply all migrations: " + ", ".join(apps) + "\nRunning migrations:\n" + "\n".join(
        f"  Applying {app}.00{n}_auto... OK" for app in apps for n in (14, 15))
