"""docs/screenshots/ keeps up with the dashboard without running ./scripts/screenshots in the suite:
every route of dashboard/urls.py has a screenshot in the script's PAGES or a reason in its
EXCLUDED, and the committed pictures and their index are the ones PAGES names."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from django.urls import NoReverseMatch, reverse

from dashboard import urls as dashboard_urls

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "screenshots"


def _script():
    spec = importlib.util.spec_from_file_location("toolscope_screenshots_script", ROOT / "scripts" / "screenshots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _dashboard_routes() -> set[str]:
    return {f"{dashboard_urls.app_name}:{pattern.name}" for pattern in dashboard_urls.urlpatterns}


def test_every_dashboard_route_is_shot_or_excluded_with_a_reason():
    script = _script()
    shot = {page.route for page in script.PAGES}
    excluded = set(script.EXCLUDED)
    routes = _dashboard_routes()
    assert routes - shot - excluded == set(), (
        "a dashboard page without a screenshot: add it to PAGES in scripts/screenshots.py (and run "
        "./scripts/screenshots), or to EXCLUDED with the reason it has none")
    assert shot & excluded == set()
    assert excluded - routes == set(), "EXCLUDED names a route dashboard/urls.py no longer has"
    assert all(reason.strip() for reason in script.EXCLUDED.values())


def test_the_pages_outside_the_dashboard_exist():
    for page in _script().PAGES:
        if not page.route.startswith("dashboard:"):
            try:
                reverse(page.route)
            except NoReverseMatch:  # pragma: no cover -- the failure message
                raise AssertionError(f"{page.file}: no route {page.route}") from None


def test_the_committed_screenshots_and_their_index_are_the_pages_the_script_shoots():
    files = [page.file for page in _script().PAGES]
    assert len(set(files)) == len(files)
    assert all(re.fullmatch(r"\d\d-[a-z0-9-]+\.png", file) for file in files)
    committed = sorted(path.name for path in SCREENSHOTS.glob("*.png"))
    assert committed == sorted(files), "run ./scripts/screenshots and commit docs/screenshots/"
    index = (SCREENSHOTS / "README.md").read_text(encoding="utf-8")
    assert re.findall(r"^\| \[([^\]]+)\]", index, flags=re.MULTILINE) == files
