"""manage.py reprice --project SLUG [--model M] [--since DATE]: price stored sessions again under
the prices now (after a project price or a genai-prices upgrade), with progress."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from datetime import time as day_start
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_date, parse_datetime

from toolscope.telemetry.models import Project
from toolscope.telemetry.services.repricing import sessions_reprice


class Command(BaseCommand):
    help = ("Price a project's stored sessions again under today's prices (its own ModelPrice rows, else "
            "genai-prices'), write the requests whose dollars changed and mark their hours for the rollups. "
            "The admin does this in a worker when a project's prices are saved; run it after upgrading "
            "genai-prices, or when no worker was running.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", metavar="SLUG", required=True, help="The project whose sessions to price.")
        parser.add_argument("--model", default="", help="Only sessions with a request of this model.")
        parser.add_argument("--since", metavar="DATE", help="Only sessions started on or after this date "
                            "(YYYY-MM-DD, or an ISO 8601 time; UTC when it names no zone).")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"No project with slug {options['project']!r}.")
        since = _moment(options["since"]) if options["since"] else None
        started = time.perf_counter()

        def progress(done: int, total: int) -> None:
            width = 30
            filled = width * done // max(total, 1)
            self.stdout.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} sessions", ending="")
            self.stdout.flush()

        result = sessions_reprice(project=project, model=options["model"], since=since, progress=progress)
        if result.sessions:
            self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(
            f"Priced {result.sessions} sessions ({result.turns} requests) again in "
            f"{time.perf_counter() - started:.1f} s: {result.changed} requests changed; their hours are marked "
            "for the rollups (the periodic task, or manage.py rollup)."))


def _moment(text: str) -> datetime:
    try:
        moment = parse_datetime(text)
        day = parse_date(text) if moment is None else None
    except ValueError:  # the shape of one, not a real one ("2026-02-30")
        moment = day = None
    if moment is None:
        if day is None:
            raise CommandError(f"--since {text!r}: not a date (YYYY-MM-DD) nor an ISO 8601 time.")
        moment = datetime.combine(day, day_start.min)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
