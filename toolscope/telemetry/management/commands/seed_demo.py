"""manage.py seed_demo: a demo project with a realistic catalog and a few hundred sessions."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from toolscope.telemetry.demo.seed import ADMIN_USERNAME, DEMO_SLUG, DemoSeedResult, demo_anchor, demo_seed


def _anchor(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        # argparse turns this into a usage error naming the option.
        raise argparse.ArgumentTypeError(f"{value!r} is not an ISO 8601 datetime") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = (
        f"Create the '{DEMO_SLUG}' project with about forty tools and recorded sessions of a coding agent, "
        f"and a superuser '{ADMIN_USERNAME}' whose password is reset and printed on every run. If the project "
        "exists it is left alone unless --reset is given."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sessions", type=int, default=300, help="Sessions to generate (default 300).")
        parser.add_argument("--seed", type=int, default=42, help="Random seed; the same seed gives the same data.")
        parser.add_argument(
            "--anchor",
            type=_anchor,
            default=None,
            help="ISO datetime the sessions end before (default: now, truncated to the hour).",
        )
        parser.add_argument("--reset", action="store_true", help="Delete and recreate the demo project.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["sessions"] < 1:
            raise CommandError("--sessions must be at least 1.")
        anchor = options["anchor"] or demo_anchor(timezone.now())
        started = time.monotonic()
        result = demo_seed(sessions=options["sessions"], seed=options["seed"], anchor=anchor, reset=options["reset"])
        self._report(result, time.monotonic() - started)

    def _report(self, result: DemoSeedResult, elapsed: float) -> None:
        counts = result.counts
        summary = (
            f"{counts.tools} tools, {counts.sessions} sessions, {counts.turns} turns, "
            f"{counts.tool_calls} tool calls"
        )
        if result.created:
            self.stdout.write(self.style.SUCCESS(f"Created project '{DEMO_SLUG}': {summary} in {elapsed:.1f}s."))
        else:
            self.stdout.write(f"Project '{DEMO_SLUG}' already exists ({summary}); left as is.")
            self.stdout.write("Run with --reset to delete and recreate it.")
        self.stdout.write(f"Admin login: {ADMIN_USERNAME} / {result.admin_password}")
        if result.key is not None:
            scopes = " ".join(result.key.api_key.scopes)
            self.stdout.write(f"API key ({scopes}): {result.key.secret}")
            warning = "Store the API key now: it is not stored and will not be shown again."
            self.stdout.write(self.style.WARNING(warning))
