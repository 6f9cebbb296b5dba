"""The Runs page: every simulation and recommendation of the project, newest first, with who
started it, its progress or headline, each opening its own page. Members read it."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from dashboard.permissions import ProjectAccess, project_view
from dashboard.selectors.runs import run_cursor_parse, run_list
from dashboard.views.common import range_from, render_page


@project_view()
@require_safe
def policy_runs(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    after = run_cursor_parse(request.GET.get("after", ""))
    page = run_list(project_id=access.project.pk, after=after)
    time_range, range_form = range_from(request)
    return render_page(request, access, "dashboard/policy_runs.html", active="policy", time_range=time_range,
                       range_form=range_form, runs=page.rows, next_after=page.next_after, first=after is None,
                       live=any(row.status in ("pending", "running") for row in page.rows))
