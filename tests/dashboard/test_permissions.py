"""project_view: one query resolves the project and the role; roles rank viewer < editor < admin."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.test import RequestFactory

from dashboard.permissions import ProjectAccess, project_access_get, project_view
from toolscope.telemetry.models import Role


def _request(user):
    request = RequestFactory().get("/")
    request.user = user
    return request


@project_view(min_role=Role.EDITOR)
def _editor_only(request, access):
    return HttpResponse(access.role)


@pytest.mark.django_db
def test_membership_and_project_resolve_in_one_query(member, project, django_assert_num_queries):
    with django_assert_num_queries(1):
        access = project_access_get(user=member, slug=project.slug)
    assert access == ProjectAccess(project=project, role=Role.VIEWER)


@pytest.mark.django_db
def test_superuser_is_admin_everywhere_in_one_query(superuser, project, django_assert_num_queries):
    with django_assert_num_queries(1):
        access = project_access_get(user=superuser, slug=project.slug)
    assert access.role == Role.ADMIN


@pytest.mark.django_db
def test_non_member_and_anonymous_resolve_to_nothing(outsider, project):
    assert project_access_get(user=outsider, slug=project.slug) is None
    assert project_access_get(user=AnonymousUser(), slug=project.slug) is None


@pytest.mark.django_db
def test_a_role_below_the_minimum_is_403(member, project):
    with pytest.raises(PermissionDenied):
        _editor_only(_request(member), slug=project.slug)


@pytest.mark.django_db
def test_the_minimum_role_and_above_pass(editor, owner, project):
    assert _editor_only(_request(editor), slug=project.slug).content == b"editor"
    assert _editor_only(_request(owner), slug=project.slug).content == b"admin"


@pytest.mark.django_db
def test_a_non_member_is_404_whatever_the_minimum(outsider, project):
    with pytest.raises(Http404):
        _editor_only(_request(outsider), slug=project.slug)


@pytest.mark.parametrize(
    ("role", "can_edit", "can_admin"),
    [(Role.VIEWER, False, False), (Role.EDITOR, True, False), (Role.ADMIN, True, True)],
)
def test_roles_rank(role, can_edit, can_admin):
    access = ProjectAccess(project=None, role=role)
    assert (access.can_edit, access.can_admin) == (can_edit, can_admin)
