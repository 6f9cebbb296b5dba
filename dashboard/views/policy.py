"""The policy pages: every member reads the draft and the versions; editors edit the draft;
admins publish and move labels (a move back is a rollback).

Policies have no time range: the templates leave out the frame's range picker, and the range is
only read so the links to the other pages keep it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from dashboard.forms_policy import (
    ErrorPatternFormSet,
    LabelMoveForm,
    MessageTestForm,
    PolicyDraftForms,
    PublishForm,
    VersionPairForm,
    error_patterns_from,
)
from dashboard.permissions import ProjectAccess, project_view
from dashboard.selectors import policy as selectors
from dashboard.views.common import range_from, render_page
from toolscope.policies.models import Policy
from toolscope.policies.services.diff import document_diff
from toolscope.policies.services.documents import PRODUCTION_LABEL
from toolscope.policies.services.publish import PolicyInvalid, label_move, policy_publish
from toolscope.policies.services.validation import policy_validate
from toolscope.telemetry.models import Role
from toolscope.telemetry.services.projects import project_error_patterns_update


def _page(request: HttpRequest, access: ProjectAccess, template: str, *, status: int = 200,
          **context: Any) -> HttpResponse:
    time_range, range_form = range_from(request)
    return render_page(request, access, template, active="policy", time_range=time_range, range_form=range_form,
                       status=status, **context)


def _url(access: ProjectAccess, name: str, *args: Any) -> str:
    return reverse(f"dashboard:{name}", args=[access.project.slug, *args])


@project_view()
@require_http_methods(["GET", "POST"])
def policy_draft(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    if request.method == "POST" and not access.can_edit:
        raise PermissionDenied("Editing the draft needs the editor role.")
    policy = selectors.policy_draft_get(project_id=access.project.pk)
    catalog = selectors.policy_catalog(project_id=access.project.pk)
    editor = PolicyDraftForms(policy=policy or Policy(project=access.project), catalog=catalog,
                              data=request.POST if request.method == "POST" else None)
    if request.method == "POST":
        if editor.is_valid():
            entry = editor.save(user=request.user)
            messages.success(request, f"Saved. {entry.summary}" if entry else "Saved: nothing changed.")
            return redirect(_url(access, "policy"))
        return _draft_page(request, access, editor, policy, status=400)
    # Only the saved draft is checked: after a refused POST the instance holds unsaved values.
    editor.attach(policy_validate(policy=policy) if policy is not None else [])
    return _draft_page(request, access, editor, policy)


def _draft_page(request: HttpRequest, access: ProjectAccess, editor: PolicyDraftForms, policy: Policy | None,
                status: int = 200) -> HttpResponse:
    rows = editor.draft.tool_rows()
    return _page(
        request, access, "dashboard/policy.html", status=status, editor=editor, policy=policy, tool_rows=rows,
        always_on_tokens=sum(row["tokens"] for row in rows if row["always_on"]),
        always_on_count=sum(1 for row in rows if row["always_on"]),
        catalog_tokens=sum(row["tokens"] for row in rows), labels=selectors.policy_labels(project_id=access.project.pk),
        test_form=MessageTestForm(), readonly=not access.can_edit,
    )


@project_view()
@require_safe
def policy_test(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    form = MessageTestForm(request.GET)
    result = None
    if "message" in request.GET and form.is_valid():
        policy = selectors.policy_get(project_id=access.project.pk)
        result = selectors.draft_message_test(project=access.project, policy=policy,
                                              message=form.cleaned_data["message"])
    return _page(request, access, "dashboard/policy_test.html", test_form=form, result=result,
                 status=200 if form.is_valid() else 400)


@project_view(min_role=Role.ADMIN)
@require_http_methods(["GET", "POST"])
def policy_publish_page(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    policy = selectors.policy_get(project_id=access.project.pk)
    if policy is None:
        raise Http404("This project has no draft policy.")
    if request.method == "POST":
        form = PublishForm(request.POST)
    else:
        form = PublishForm(initial={"label": request.GET.get("label") or PRODUCTION_LABEL})
    problems = []
    if request.method == "POST" and form.is_valid():
        label = form.cleaned_data["label"]
        try:
            version = policy_publish(policy=policy, user=request.user, comment=form.cleaned_data["comment"],
                                     label=label)
        except PolicyInvalid as exc:
            problems = exc.problems
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Published v{version.number}; {label} now serves it.")
            return redirect(f"{_url(access, 'policy_versions')}?b={version.number}")
    label = form["label"].value()
    preview = selectors.publish_preview(project=access.project, policy=policy, label=label)
    return _page(request, access, "dashboard/policy_publish.html", form=form, problems=problems, label=label,
                 current=preview.current, changes=preview.changes, preview=preview,
                 current_title=f"v{preview.current} ({label})",
                 status=400 if form.is_bound else 200)


@project_view()
@require_safe
def policy_versions(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    labels = selectors.policy_labels(project_id=access.project.pk)
    versions = selectors.policy_versions(project_id=access.project.pk, labels=labels)
    pair = VersionPairForm(request.GET)
    a, b = _pair(pair, versions)
    diff = None
    if a is not None and b is not None:
        documents = selectors.policy_version_documents(project_id=access.project.pk, numbers=[a, b])
        if a in documents and b in documents:
            diff = document_diff(old=documents[a], new=documents[b])
    return _page(request, access, "dashboard/policy_versions.html", labels=labels, versions=versions, a=a, b=b,
                 diff=diff, label_names=[label.name for label in labels] or [PRODUCTION_LABEL],
                 audit=selectors.policy_audit_recent(project_id=access.project.pk))


def _pair(form: VersionPairForm, versions: list[selectors.VersionRow]) -> tuple[int | None, int | None]:
    """The versions to compare: those asked for, else the newest against the one before it."""
    data = form.cleaned_data if form.is_valid() else {}
    newest = versions[0].number if versions else None
    b = data.get("b") or newest
    a = data.get("a") or (b - 1 if b and b > 1 else None)
    return a, b


@project_view(min_role=Role.ADMIN)
@require_POST
def policy_label_move(request: HttpRequest, access: ProjectAccess, number: int) -> HttpResponse:
    version = selectors.policy_version_get(project_id=access.project.pk, number=number)
    if version is None:
        raise Http404("No such version.")
    form = LabelMoveForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a label: letters, digits, '-' or '_'.")
        return redirect(_url(access, "policy_versions"))
    name = form.cleaned_data["label"]
    label_move(project=access.project, name=name, version=version, user=request.user)
    messages.success(request, f"{name} now serves v{number}.")
    return redirect(_url(access, "policy_versions"))


@project_view()
@require_http_methods(["GET", "POST"])
def policy_error_patterns(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    """The project's tool error patterns: how a call is told failed when its format flags nothing."""
    if request.method == "POST" and not access.can_edit:
        raise PermissionDenied("Editing error patterns needs the editor role.")
    if request.method == "GET":
        formset = ErrorPatternFormSet(initial=access.project.tool_error_patterns, prefix="patterns")
        return _page(request, access, "dashboard/policy_errors.html", formset=formset, readonly=not access.can_edit)
    formset = ErrorPatternFormSet(request.POST, prefix="patterns")
    if formset.is_valid():
        changed = project_error_patterns_update(project=access.project, patterns=error_patterns_from(formset),
                                                user=request.user)
        messages.success(request, "Saved. Calls stored from now on are classified with these patterns."
                         if changed else "Saved: nothing changed.")
        return redirect(_url(access, "policy_errors"))
    return _page(request, access, "dashboard/policy_errors.html", formset=formset, readonly=False, status=400)
