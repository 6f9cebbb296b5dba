"""manage.py rollup [--all] [--project SLUG]: rebuild the hourly rollups the dashboard reads."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from toolscope.telemetry.models import Project
from toolscope.telemetry.services.rollups import rollups_rebuild_all, rollups_refresh


class Command(BaseCommand):
    help = (
        "Without --all: do what the periodic task does until no mark is left (rebuild the hours marked "
        "for a rebuild). "
        "With --all: rebuild every hour that has data, of one project (--project) or of all."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true", help="Rebuild every hour that has data.")
        parser.add_argument("--project", metavar="SLUG", help="Only this project (with --all).")
        parser.add_argument("--limit", type=int, default=500, help="Dirty hours claimed per transaction.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["all"]:
            self._rebuild_all(options["project"])
        elif options["project"]:
            raise CommandError("--project needs --all: dirty hours are refreshed for every project at once.")
        else:
            self._refresh(options["limit"])

    def _rebuild_all(self, slug: str | None) -> None:
        projects = Project.objects.order_by("slug")
        if slug is not None:
            projects = projects.filter(slug=slug)
            if not projects.exists():
                raise CommandError(f"No project with slug {slug!r}.")
        started = time.perf_counter()
        total = 0
        for project in projects:
            project_started = time.perf_counter()
            hours = rollups_rebuild_all(project_id=project.pk)
            total += hours
            elapsed = time.perf_counter() - project_started
            self.stdout.write(f"{project.slug}: rebuilt {hours} hours in {elapsed:.2f} s.")
        self.stdout.write(self.style.SUCCESS(f"Rebuilt {total} hours in {time.perf_counter() - started:.2f} s."))

    def _refresh(self, limit: int) -> None:
        if limit < 1:
            raise CommandError("--limit must be at least 1.")
        started = time.perf_counter()
        total = rounds = 0
        # Stops at a short round: marks that keep arriving are left to the next run, not chased.
        while True:
            rebuilt = rollups_refresh(limit=limit)
            total += rebuilt
            rounds += 1
            if rebuilt < limit:
                break
        elapsed = time.perf_counter() - started
        self.stdout.write(self.style.SUCCESS(f"Refreshed {total} dirty hours in {rounds} rounds in {elapsed:.2f} s."))
