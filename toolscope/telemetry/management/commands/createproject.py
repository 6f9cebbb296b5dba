"""manage.py createproject SLUG --name NAME --owner USERNAME: a project ready to receive telemetry."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from toolscope.telemetry.models import Encoding
from toolscope.telemetry.services.projects import CreatedProject, project_create


class Command(BaseCommand):
    help = (
        "Create a project with its draft policy, an admin owner (created if missing) and an API key "
        "with the ingest and policy:read scopes. Secrets are printed once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="URL name of the project, e.g. acme-coder.")
        parser.add_argument("--name", required=True, help="Display name.")
        parser.add_argument("--owner", required=True, help="Username of the owner; created if missing.")
        parser.add_argument("--owner-email", default="", help="Email of the owner, if created.")
        parser.add_argument(
            "--encoding", default=Encoding.O200K_BASE, help=f"Tokenizer: {' or '.join(Encoding.values)}."
        )
        parser.add_argument("--context-window", type=int, default=200_000, help="Tokens the model accepts.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            created = project_create(
                slug=options["slug"],
                name=options["name"],
                owner=options["owner"],
                owner_email=options["owner_email"],
                encoding=options["encoding"],
                context_window=options["context_window"],
            )
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        self._report(created)

    def _report(self, created: CreatedProject) -> None:
        project = created.project
        self.stdout.write(self.style.SUCCESS(f"Created project {project.slug} ({project.name})."))
        self.stdout.write(f"Encoding {project.encoding}, context window {project.context_window} tokens.")
        if created.owner_password is None:
            self.stdout.write(f"Owner: {created.owner.get_username()} (existing user), role admin.")
        else:
            self.stdout.write(f"Owner: {created.owner.get_username()} (new user), role admin.")
            self.stdout.write(f"Owner password: {created.owner_password}")
        scopes = " ".join(created.key.api_key.scopes)
        self.stdout.write(f"API key ({scopes}): {created.key.secret}")
        shown = "the key" if created.owner_password is None else "the key and the password"
        self.stdout.write(self.style.WARNING(f"Store {shown} now: secrets are not stored and will not be shown again."))
