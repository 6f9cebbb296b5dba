"""manage.py embed_tools [--project SLUG]: embed the catalog definitions tool_search's semantic
side has no stored vector for (what the worker does when a catalog changes), with progress."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from toolscope.policies.services.embeddings import catalog_texts, texts_embed
from toolscope.policies.services.semantic_search import semantic_identity
from toolscope.telemetry.models import Project


class Command(BaseCommand):
    help = ("Embed, once, every catalog definition that tool_search's semantic ranking has no stored vector "
            "for, with the server's model (TOOL_SEARCH_MODEL). Workers do this when a catalog changes; run it "
            "after turning a model on or changing it.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", metavar="SLUG", help="Only this project's definitions.")

    def handle(self, *args: Any, **options: Any) -> None:
        identity = semantic_identity()
        if identity is None:
            raise CommandError("No semantic model: TOOL_SEARCH_MODEL is off or nothing is installed (README).")
        projects = Project.objects.order_by("slug")
        if options["project"] is not None:
            projects = projects.filter(slug=options["project"])
            if not projects.exists():
                raise CommandError(f"No project with slug {options['project']!r}.")
        texts = catalog_texts(project_ids=projects.values_list("pk", flat=True))
        started = time.perf_counter()
        self.stdout.write(f"{len(texts)} distinct definitions; model {identity}.")

        def progress(done: int, total: int) -> None:
            width = 30
            filled = width * done // max(total, 1)
            self.stdout.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}", ending="")
            self.stdout.flush()

        result = texts_embed(texts, progress=progress)
        if result["embedded"]:
            self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(
            f"Embedded {result['embedded']} of {result['texts']} ({result['texts'] - result['embedded']} already "
            f"stored) in {time.perf_counter() - started:.1f} s."))
