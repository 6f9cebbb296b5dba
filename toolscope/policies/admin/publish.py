"""The draft policy's "Publish" page: what would change, what is wrong, and the button."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from toolscope.policies.models import Policy, PolicyVersion
from toolscope.policies.selectors import policy_label_names, policy_label_version
from toolscope.policies.services.diff import document_diff
from toolscope.policies.services.documents import PRODUCTION_LABEL, policy_document_build
from toolscope.policies.services.publish import PolicyInvalid, policy_publish, version_repeated
from toolscope.policies.services.validation import PolicyProblem, policy_validate
from toolscope.telemetry.admin.common import change_url

STANDARD_LABELS = (PRODUCTION_LABEL, "staging")


class PublishForm(forms.Form):
    label = forms.ChoiceField(help_text="Agents fetching this label get the new version on their next poll.")
    comment = forms.CharField(
        max_length=PolicyVersion._meta.get_field("comment").max_length, required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), help_text="Why, for the version history.",
    )

    def __init__(self, *args: Any, labels: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = [*STANDARD_LABELS, *sorted(set(labels) - set(STANDARD_LABELS))]
        self.fields["label"].choices = [(name, name) for name in names]


def publish_view(model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    policy = model_admin.get_object(request, object_id)
    if policy is None:
        raise Http404("No such policy.")
    if not model_admin.has_change_permission(request, policy):
        raise PermissionDenied
    form = PublishForm(request.POST or None, labels=policy_label_names(project_id=policy.project_id))
    problems = policy_validate(policy=policy)
    if request.method == "POST" and form.is_valid() and not problems:
        current = policy_label_version(project_id=policy.project_id, name=form.cleaned_data["label"])
        repeated = version_repeated(project_id=policy.project_id, document=policy_document_build(policy=policy),
                                    current=current)
        if repeated is not None:
            form.add_error(None, f"The draft is identical to v{repeated}: nothing new to publish. To serve v{repeated} "
                                 f"under {form.cleaned_data['label']}, point the label at it from the version's page.")
            return _render(model_admin, request, policy, form, problems)
        try:
            version = policy_publish(
                policy=policy, user=request.user, comment=form.cleaned_data["comment"],
                label=form.cleaned_data["label"],
            )
        except PolicyInvalid as exc:  # the draft changed between the check above and the lock
            problems = exc.problems
        else:
            label = form.cleaned_data["label"]
            model_admin.message_user(request, f"Published v{version.number} to {label}.", messages.SUCCESS)
            return HttpResponseRedirect(change_url(version))
    return _render(model_admin, request, policy, form, problems)


def _render(
    model_admin: admin.ModelAdmin, request: HttpRequest, policy: Policy, form: PublishForm,
    problems: list[PolicyProblem],
) -> TemplateResponse:
    production = policy_label_version(project_id=policy.project_id, name=PRODUCTION_LABEL)
    draft = policy_document_build(policy=policy)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Publish the draft policy of {policy.project}",
        "opts": model_admin.model._meta,
        "original": policy,
        "policy_url": change_url(policy),
        "form": form,
        "problems": problems,
        "production": production,
        "changes": document_diff(old=production.document, new=draft) if production else [],
    }
    return TemplateResponse(request, "admin/policies/policy/publish.html", context)
