"""The root page: straight to the user's only project, else the list of their projects."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from dashboard import selectors


@login_required
def home(request: HttpRequest) -> HttpResponse:
    projects = selectors.projects_for_user(user=request.user)
    if len(projects) == 1:
        return redirect("dashboard:overview", slug=projects[0].slug)
    return render(request, "dashboard/home.html", {"projects": projects})
