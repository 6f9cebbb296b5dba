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
from toolscope.policies.services.documents import PRODUCTION_LABEL, document_content, policy_document_build
from toolscope.policies.services.drafts import draft_last_undoable, policy_draft_restore
from toolscope.policies.services.drafts import policy_draft_undo as policy_draft_undo_entry
from toolscope.policies.services.polls import KEEP_DAYS, Poller, policy_pollers
from toolscope.policies.services.publish import PolicyInvalid, label_move, policy_publish
from toolscope.policies.services.validation import policy_validate
from toolscope.telemetry.models import Role
from toolscope.telemetry.services.projects import project_error_patterns_update


def _page(request: HttpRequest, access: ProjectAccess, template: str, *, status: int = 200,
          **context: Any) -> HttpResponse:
    time_range, range_form = range_from(request)
    return render_page(request, access, template, active="policy", time_range=time_range, range_form=range_form,
                       status=status, **context)


def confirm_page(request: HttpRequest, access: ProjectAccess, *, tab: str, title: str, intro: str,
                 changes: list[str], action: str, button: str, cancel: str, **context: Any) -> HttpResponse:
    """A change to the policy shown before it is made: what it changes, a button that makes it
    (a POST to `action` with `hidden`), and a way back."""
    context = {"options": [], "hidden": {}, "notes": [], "refuse": False, "changes_title": "What changes:",
               "empty_text": "Nothing changes.", **context}
    return _page(request, access, "dashboard/policy_confirm.html", tab=tab, title=title, intro=intro,
                 changes=changes, action=action, button=button, cancel=cancel, **context)


def pollers_line(label: str, pollers: list[Poller]) -> str:
    """Who a change to `label` reaches, in a sentence."""
    if not pollers:
        return f"No API key has fetched {label} in the last {KEEP_DAYS} days."
    shown = "; ".join(f"{poller.key_name} ({poller.key_prefix}…, v{poller.version} at "
                      f"{poller.last_at:%Y-%m-%d %H:%M} UTC)" for poller in pollers[:5])
    more = f" and {len(pollers) - 5} more" if len(pollers) > 5 else ""
    return f"Fetching {label} lately: {shown}{more}."


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
    # Counted as the Test page counts them: one definition per name, whose it is said (issue 28, item 4).
    catalog = selectors.catalog_view(project=access.project, agent=request.GET.get("agent", ""))
    rows = [{**row, "tokens": catalog.tokens.get(row["name"], row["tokens"])} for row in editor.draft.tool_rows()]
    return _page(
        request, access, "dashboard/policy.html", status=status, editor=editor, policy=policy, tool_rows=rows,
        undoable=draft_last_undoable(policy=policy) if policy is not None and not status >= 400 else None,
        always_on_tokens=sum(row["tokens"] for row in rows if row["always_on"]),
        always_on_count=sum(1 for row in rows if row["always_on"]),
        catalog_tokens=sum(row["tokens"] for row in rows), labels=selectors.policy_labels(project_id=access.project.pk),
        test_form=MessageTestForm(), readonly=not access.can_edit, catalog=catalog,
    )


@project_view()
@require_safe
def policy_test(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    form = MessageTestForm(request.GET)
    result = None
    catalog = selectors.catalog_view(project=access.project, agent=request.GET.get("agent", ""))
    if "message" in request.GET and form.is_valid():
        policy = selectors.policy_get(project_id=access.project.pk)
        result = selectors.draft_message_test(project=access.project, policy=policy,
                                              message=form.cleaned_data["message"], catalog=catalog)
    return _page(request, access, "dashboard/policy_test.html", test_form=form, result=result, catalog=catalog,
                 status=200 if form.is_valid() else 400)


@project_view(min_role=Role.ADMIN)
@require_http_methods(["GET", "POST"])
def policy_publish_page(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    """The draft's diff against what the chosen label serves, then a publish of exactly that: the
    label is picked among the project's (a new one is named explicitly), and a draft identical to
    a version is not published again (the page offers to point the label at that version)."""
    policy = selectors.policy_get(project_id=access.project.pk)
    if policy is None:
        raise Http404("This project has no draft policy.")
    names = [label.name for label in selectors.policy_labels(project_id=access.project.pk)]
    chosen = PublishForm(request.GET if "label" in request.GET else
                         {"label": PRODUCTION_LABEL if PRODUCTION_LABEL in names or not names else names[0]},
                         labels=names)
    label = chosen.cleaned_data["label"] if chosen.is_valid() else None
    form = PublishForm(request.POST, labels=names) if request.method == "POST" else None
    problems = []
    if form is not None and form.is_valid():
        label = form.cleaned_data["label"]
        preview = selectors.publish_preview(project=access.project, policy=policy, label=label)
        if preview.identical is not None:
            form.add_error(None, f"The draft is identical to v{preview.identical}: nothing new to publish.")
        else:
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
    preview = selectors.publish_preview(project=access.project, policy=policy, label=label) if label else None
    return _page(request, access, "dashboard/policy_publish.html", chosen=chosen, form=form, problems=problems,
                 label=label, preview=preview, current=preview.current if preview else None,
                 changes=preview.changes if preview else None, new=label not in names,
                 pollers=policy_pollers(project_id=access.project.pk, labels=[label])[label] if label else [],
                 current_title=f"v{preview.current} ({label})" if preview else "",
                 status=400 if form is not None or (request.GET and not chosen.is_valid()) else 200)


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
    pollers = policy_pollers(project_id=access.project.pk, labels=[label.name for label in labels])
    return _page(request, access, "dashboard/policy_versions.html", labels=labels, versions=versions, a=a, b=b,
                 pollers=pollers, keep_days=KEEP_DAYS,
                 diff=diff, label_names=[label.name for label in labels],
                 audit=selectors.policy_audit_recent(project_id=access.project.pk))


def _pair(form: VersionPairForm, versions: list[selectors.VersionRow]) -> tuple[int | None, int | None]:
    """The versions to compare: those asked for, else the newest against the one before it."""
    data = form.cleaned_data if form.is_valid() else {}
    newest = versions[0].number if versions else None
    b = data.get("b") or newest
    a = data.get("a") or (b - 1 if b and b > 1 else None)
    return a, b


@project_view(min_role=Role.ADMIN)
@require_http_methods(["GET", "POST"])
def policy_label_move(request: HttpRequest, access: ProjectAccess, number: int) -> HttpResponse:
    """GET: what moving the chosen label to this version changes for the agents that poll it;
    POST: move it. Only the project's labels move (publishing makes new ones)."""
    version = selectors.policy_version_get(project_id=access.project.pk, number=number)
    if version is None:
        raise Http404("No such version.")
    names = [label.name for label in selectors.policy_labels(project_id=access.project.pk)]
    form = LabelMoveForm(request.POST if request.method == "POST" else request.GET, labels=names)
    if not form.is_valid():
        messages.error(request, f"Choose one of the project's labels to point at v{number}.")
        return redirect(_url(access, "policy_versions"))
    name = form.cleaned_data["label"]
    if request.method == "POST":
        label_move(project=access.project, name=name, version=version, user=request.user)
        messages.success(request, f"{name} now serves v{number}.")
        return redirect(_url(access, "policy_versions"))
    current = selectors.policy_label_version(project_id=access.project.pk, name=name)
    rollback = current is not None and current.number > number
    pollers = policy_pollers(project_id=access.project.pk, labels=[name])[name]
    return confirm_page(
        request, access, tab="versions", title=f"Point {name} at v{number}",
        intro=(f"{name} serves v{current.number} now. " if current else "")
        + f"Agents polling {name} get v{number} on their next fetch." + (" This is a rollback." if rollback else ""),
        changes=document_diff(old=current.document, new=version.document) if current else [],
        changes_title=f"What changes for agents on {name} (v{current.number if current else 0} → v{number}):",
        empty_text=f"{name} already serves v{number}: nothing changes." if current and current.pk == version.pk
        else "No difference in content.",
        refuse=current is not None and current.pk == version.pk, notes=[pollers_line(name, pollers)],
        pollers=pollers, hidden={"label": name}, action=_url(access, "policy_label_move", number),
        button=f"Move {name} to v{number}", cancel=_url(access, "policy_versions"))


@project_view(min_role=Role.EDITOR)
@require_http_methods(["GET", "POST"])
def policy_draft_reset(request: HttpRequest, access: ProjectAccess, number: int) -> HttpResponse:
    """GET: what resetting the draft to a published version changes; POST: do it (undoable)."""
    version = selectors.policy_version_get(project_id=access.project.pk, number=number)
    policy = selectors.policy_get(project_id=access.project.pk)
    if version is None or policy is None:
        raise Http404("No such version, or no draft.")
    if request.method == "POST":
        entry = policy_draft_restore(policy=policy, snapshot={"document": version.document}, user=request.user)
        messages.success(request, f"The draft is v{number} again" + (f": {entry.summary}." if entry else
                                                                     " (it already was)."))
        return redirect(_url(access, "policy"))
    return confirm_page(
        request, access, tab="versions", title=f"Reset the draft to v{number}",
        intro=f"The draft's selection, output rules and per-tool settings become v{number}'s. Nothing is published; "
              "you can undo it from the draft page.",
        changes=document_diff(old=policy_document_build(policy=policy), new=document_content(version.document)),
        changes_title="What changes in the draft:", empty_text=f"The draft already is v{number}: nothing changes.",
        action=_url(access, "policy_draft_reset", number), button=f"Reset the draft to v{number}",
        cancel=_url(access, "policy_versions"))


@project_view(min_role=Role.EDITOR)
@require_POST
def policy_draft_undo(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    """Put back the draft the last edit replaced, if that edit is still the last policy change."""
    policy = selectors.policy_get(project_id=access.project.pk)
    last = draft_last_undoable(policy=policy) if policy is not None else None
    if last is None or str(last.pk) != request.POST.get("entry"):
        messages.error(request, "That change is no longer the last one: nothing was undone.")
        return redirect(_url(access, "policy"))
    entry = policy_draft_undo_entry(policy=policy, entry=last, user=request.user)
    messages.success(request, "Undone" + (f": {entry.summary}." if entry else "."))
    return redirect(_url(access, "policy"))


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
