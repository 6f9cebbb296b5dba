"""Who may see and do what on a project's dashboard pages.

A member reads with any role; an editor also edits drafts; an admin also manages keys and
publishes. Superusers count as admin everywhere. Someone who is not a member gets 404 for the
project's pages, never 403: a 403 would tell them the project exists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, Concatenate, ParamSpec

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse

from toolscope.telemetry.models import Membership, Project, Role

RANK = {Role.VIEWER: 1, Role.EDITOR: 2, Role.ADMIN: 3}

P = ParamSpec("P")
ProjectViewFunc = Callable[Concatenate[HttpRequest, "ProjectAccess", P], HttpResponse]


@dataclass(frozen=True)
class ProjectAccess:
    """A project as one user sees it: the project and the role they hold in it."""

    project: Project
    role: str

    def allows(self, role: str) -> bool:
        return RANK[Role(self.role)] >= RANK[Role(role)]

    @property
    def can_edit(self) -> bool:
        return self.allows(Role.EDITOR)

    @property
    def can_admin(self) -> bool:
        return self.allows(Role.ADMIN)


def project_access_get(*, user: AbstractBaseUser | AnonymousUser, slug: str) -> ProjectAccess | None:
    """The project `slug` and the user's role in it, in one query; None if they may not see it."""
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        project = Project.objects.filter(slug=slug).first()
        return ProjectAccess(project=project, role=Role.ADMIN) if project else None
    membership = Membership.objects.select_related("project").filter(project__slug=slug, user=user).first()
    if membership is None:
        return None
    return ProjectAccess(project=membership.project, role=membership.role)


def project_view(min_role: str = Role.VIEWER) -> Callable[[ProjectViewFunc[P]], Callable[..., HttpResponse]]:
    """Decorate `view(request, access, **kwargs)`; the URL passes `slug`.

    Anonymous users are sent to the login page, non-members get 404, members whose role is below
    `min_role` get 403.
    """

    def decorator(view: ProjectViewFunc[P]) -> Callable[..., HttpResponse]:
        @login_required
        @wraps(view)
        def wrapped(request: HttpRequest, slug: str, *args: Any, **kwargs: Any) -> HttpResponse:
            access = project_access_get(user=request.user, slug=slug)
            if access is None:
                raise Http404("No such project.")
            if not access.allows(min_role):
                raise PermissionDenied(f"This needs the {min_role} role.")
            return view(request, access, *args, **kwargs)

        return wrapped

    return decorator
