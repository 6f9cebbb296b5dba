"""The policy draft editor: the draft's own fields and tool sets, and formsets of its groups,
context rules and compaction rules, saved together with one audit entry; plus the publish form.

Pickers take their choices from rows the view loaded once (the catalog, the draft's groups): a
ModelMultipleChoiceField would query once per form of a formset to render and once to validate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from django import forms
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Model, Prefetch

from toolscope.policies.models import (
    CompactionRule,
    ContextRule,
    Policy,
    PolicyAuditAction,
    PolicyAuditEntry,
    Tool,
    ToolGroup,
)
from toolscope.policies.selectors import SETTINGS_FIELDS
from toolscope.policies.services.audit import audit_draft_change, audit_record
from toolscope.policies.services.documents import PRODUCTION_LABEL
from toolscope.policies.services.drafts import draft_snapshot
from toolscope.policies.services.regex_safety import regex_problem
from toolscope.policies.services.validation import PolicyProblem
from toolscope.telemetry.error_patterns import validate_error_patterns

MESSAGE_MAX = 4000
# policy_validate's field prefixes -> the editor's sections.
SECTIONS = {"context_rules": "rules", "compaction_rules": "compaction", "groups": "groups"}


class PickField(forms.TypedMultipleChoiceField):
    """Many-to-many picks by primary key among choices given up front; initial values may be rows."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(coerce=int, required=False, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return [item.pk if isinstance(item, Model) else item for item in value]
        return value

    def has_changed(self, initial: Any, data: Any) -> bool:
        before = {str(item) for item in self.prepare_value(initial or [])}
        return before != {str(item) for item in data or []}


class KeywordsField(forms.CharField):
    """A context rule's keywords as one comma-separated line."""

    def prepare_value(self, value: Any) -> Any:
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:
        text = super().to_python(value)
        return list(dict.fromkeys(word.strip() for word in text.split(",") if word.strip()))

    def has_changed(self, initial: Any, data: Any) -> bool:
        return (initial or []) != self.to_python(data)


def _choices(rows: Iterable[Any]) -> list[tuple[int, str]]:
    return [(row.pk, row.name) for row in rows]


class PolicyDraftForm(forms.ModelForm):
    always_on = PickField(label="Always-on set", widget=forms.CheckboxSelectMultiple)
    allowed = PickField(label="Allowed", widget=forms.CheckboxSelectMultiple,
                        help_text="None checked: every catalog tool may be sent.")

    class Meta:
        model = Policy
        fields = ["mode", "always_on", "allowed", "sticky_discovered", "hint_prefix", "search_top_k",
                  "search_max_top_k", "search_ranker", "search_learned", "search_semantic", "provider_search",
                  "search_defer_loading", "suppress_duplicates", "search_always_on", "rule_window", "tool_list"]
        labels = {"sticky_discovered": "Sticky discovered tools", "hint_prefix": "Hint prefix",
                  "search_top_k": "Search top k", "search_max_top_k": "Search max top k",
                  "search_ranker": "Search ranker", "search_learned": "Learned search history",
                  "search_semantic": "Semantic search",
                  "provider_search": "Provider search", "search_defer_loading": "Defer loading",
                  "suppress_duplicates": "Suppress duplicate outputs",
                  "search_always_on": "Search always on", "rule_window": "Rule window",
                  "tool_list": "Tool list"}
        # The page words each option itself; a help text would only leave a dangling aria reference.
        help_texts = {"sticky_discovered": "", "hint_prefix": "", "provider_search": "", "search_defer_loading": "",
                      "search_ranker": "",
                      "search_learned": "", "search_semantic": "", "search_always_on": "", "rule_window": "",
                      "tool_list": ""}

    def __init__(self, *args: Any, catalog: Sequence[Tool], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.catalog = catalog
        for name in ("always_on", "allowed"):
            self.fields[name].choices = _choices(catalog)

    def tool_rows(self) -> list[dict[str, Any]]:
        """One row per catalog tool with its schema tokens and whether each set has it, as the
        form stands (the draft, or what was posted)."""
        always_on = {str(pk) for pk in self["always_on"].value() or []}
        allowed = {str(pk) for pk in self["allowed"].value() or []}
        return [{"id": tool.pk, "name": tool.name, "description": tool.description,
                 "tokens": tool.schema_tokens or 0, "always_on": str(tool.pk) in always_on,
                 "allowed": str(tool.pk) in allowed} for tool in self.catalog]


class ToolGroupForm(forms.ModelForm):
    tools = PickField(widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = ToolGroup
        fields = ["name", "description", "tools"]

    def __init__(self, *args: Any, catalog: Sequence[Tool], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tools"].choices = _choices(catalog)

    def picked(self) -> list[str]:
        """Names of the tools checked, as the form stands."""
        chosen = {str(pk) for pk in self["tools"].value() or []}
        return [name for pk, name in self.fields["tools"].choices if str(pk) in chosen]


class ContextRuleForm(forms.ModelForm):
    keywords = KeywordsField(required=False, label="Keywords, comma-separated")
    after_tools = KeywordsField(required=False, label="After calls of, comma-separated")
    groups = PickField(widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = ContextRule
        fields = ["name", "keywords", "regex", "after_tools", "groups", "enabled"]

    def __init__(self, *args: Any, groups: Sequence[ToolGroup], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["groups"].choices = _choices(groups)

    def clean_regex(self) -> str:
        # Refused here, not only at publish: the test box runs the draft's regexes on this server.
        pattern = self.cleaned_data.get("regex") or ""
        if pattern and (problem := regex_problem(pattern, flags=re.IGNORECASE)):
            raise forms.ValidationError(problem)
        return pattern


class CompactionRuleForm(forms.ModelForm):
    class Meta:
        model = CompactionRule
        fields = ["tools", "max_tokens", "strategy"]
        labels = {"tools": "Tools (glob)"}


def _formset(model: type[Model], form: type[forms.ModelForm], extra: int) -> Any:
    return forms.inlineformset_factory(Policy, model, form=form, extra=extra, can_delete=True,
                                       can_order=model is not ToolGroup)


ToolGroupFormSet = _formset(ToolGroup, ToolGroupForm, 1)
ContextRuleFormSet = _formset(ContextRule, ContextRuleForm, 1)
CompactionRuleFormSet = _formset(CompactionRule, CompactionRuleForm, 1)


class ErrorPatternForm(forms.Form):
    """One of the project's tool error patterns (toolscope/telemetry/error_patterns.py)."""

    name = forms.CharField(max_length=60)
    regex = forms.CharField(max_length=500, label="Regex (RE2, matched at the output's start)")
    kind = forms.ChoiceField(choices=[("error", "error: status becomes error"),
                                      ("unflagged", "unflagged: status stays, counted as error text")])


def error_patterns_from(formset: Any) -> list[dict[str, str]]:
    """The patterns a valid formset holds, in order, deleted and blank rows left out."""
    return [{name: form.cleaned_data[name] for name in ("name", "regex", "kind")} for form in formset.forms
            if form.cleaned_data and not form.cleaned_data.get("DELETE")]


class BaseErrorPatternFormSet(forms.BaseFormSet):
    def clean(self) -> None:
        """The patterns as the project would keep them: RE2-safe (the message names the pattern)."""
        super().clean()
        if not any(self.errors):
            validate_error_patterns(error_patterns_from(self))


ErrorPatternFormSet = forms.formset_factory(ErrorPatternForm, formset=BaseErrorPatternFormSet, extra=1,
                                            can_delete=True, max_num=50, validate_max=True)


class PolicyDraftForms:
    """Every form of the draft editor, validated and saved as one."""

    def __init__(self, *, policy: Policy, catalog: Sequence[Tool], data: Any = None) -> None:
        self.policy = policy
        self.draft = PolicyDraftForm(data, instance=policy, catalog=catalog)
        self.groups = ToolGroupFormSet(data, instance=policy, prefix="groups", form_kwargs={"catalog": catalog},
                                       queryset=ToolGroup.objects.prefetch_related("tools"))
        groups = list(self.groups.get_queryset())
        self.rules = ContextRuleFormSet(data, instance=policy, prefix="rules", form_kwargs={"groups": groups},
                                        queryset=ContextRule.objects.prefetch_related(
                                            Prefetch("groups", queryset=ToolGroup.objects.only("id"))))
        self.compaction = CompactionRuleFormSet(data, instance=policy, prefix="compaction")
        self.problems: dict[str, list[str]] = {}

    @property
    def formsets(self) -> tuple[Any, ...]:
        return self.groups, self.rules, self.compaction

    def is_valid(self) -> bool:
        return all([self.draft.is_valid(), *(formset.is_valid() for formset in self.formsets)])

    @transaction.atomic
    def save(self, *, user: AbstractBaseUser) -> PolicyAuditEntry | None:
        """Write the draft and record what changed (nothing recorded for a save without edits)."""
        created = self.policy.pk is None
        if not created and not self.draft.has_changed() and not any(f.has_changed() for f in self.formsets):
            return None
        if not created:
            # Serialises edits of one draft, so `before` is the state this save replaces.
            list(Policy.objects.select_for_update().filter(pk=self.policy.pk).values_list("pk", flat=True))
        before = None if created else draft_snapshot(policy=self.policy)
        policy = self.draft.save(commit=False)
        policy.updated_by = user
        policy.save()
        self.draft.save_m2m()
        # Rules first: a group deleted in the same save then takes its rule links with it.
        for formset in (self.rules, self.compaction, self.groups):
            formset.instance = policy
            formset.save()
            if formset.can_order:
                _renumber(formset)
        if created:
            return audit_record(project=policy.project, user=user, action=PolicyAuditAction.DRAFT_CHANGED,
                                summary="draft created", detail={"mode": policy.mode})
        return audit_draft_change(policy=policy, user=user, before=before)

    def attach(self, problems: Sequence[PolicyProblem]) -> None:
        """File policy_validate's problems under the section they belong to, and mark the rows."""
        for problem in problems:
            section, index = _indexed(problem.field.partition(".")[0])
            key = SECTIONS.get(section, "draft")
            self.problems.setdefault(key, []).append(str(problem))
            form = self._row_of(key, problem.field.partition(".")[2], index)
            if form is not None:
                form.problems = [*getattr(form, "problems", []), problem.message]

    def _row_of(self, key: str, rest: str, index: int | None) -> forms.Form | None:
        """The saved row a problem names: compaction rules by position, groups and rules by name
        (a rule's name may itself contain dots)."""
        if key == "compaction":
            rows = list(self.compaction.initial_forms)
            return rows[index] if index is not None and index < len(rows) else None
        formset = {"rules": self.rules, "groups": self.groups}.get(key)
        if formset is None:
            return None
        return next((form for form in formset.initial_forms
                     if rest == form.instance.name or rest.startswith(f"{form.instance.name}.")), None)


def _indexed(section: str) -> tuple[str, int | None]:
    """"compaction_rules[2]" -> ("compaction_rules", 2)."""
    match = re.fullmatch(r"(\w+)\[(\d+)\]", section)
    return (match[1], int(match[2])) if match else (section, None)


def _renumber(formset: Any) -> None:
    """Positions 0..n in the order the form gives, written for the rows whose position moved."""
    moved = []
    for position, form in enumerate(formset.ordered_forms):
        if form.instance.position != position:
            form.instance.position = position
            moved.append(form.instance)
    if moved:
        formset.model.objects.bulk_update(moved, ["position"])


class LabelChoiceForm(forms.Form):
    """A label picked among the project's own (`labels`); with `creating`, a new one may be
    named instead, explicitly: a typo never makes a label."""

    NEW = "__new__"

    label = forms.ChoiceField()
    new_label = forms.SlugField(max_length=64, required=False, label="New label")

    def __init__(self, *args: Any, labels: Sequence[str], creating: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.labels = list(labels)
        choices = [(name, name) for name in self.labels]
        if not creating:
            choices.insert(0, ("", "Choose a label…"))
            del self.fields["new_label"]
        else:
            choices.append((self.NEW, "A new label…"))
        self.fields["label"].choices = choices
        self.creating = creating

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.creating and data.get("label") == self.NEW:
            name = data.get("new_label")
            if not name:
                self.add_error(None, "Name the new label: letters, digits, '-' or '_'.")
            elif name in self.labels:
                self.add_error(None, f"{name} exists already: pick it from the list.")
            else:
                data["label"] = name
        return data


class PublishForm(LabelChoiceForm):
    comment = forms.CharField(max_length=500, required=False, widget=forms.TextInput(attrs={"size": 60}),
                              help_text="What changed and why; agents see it in the audit trail, not the document.")

    def __init__(self, *args: Any, labels: Sequence[str], **kwargs: Any) -> None:
        # A project's first publish creates production; later ones pick a label, or name a new one.
        super().__init__(*args, labels=labels or [PRODUCTION_LABEL], creating=True, **kwargs)


class LabelMoveForm(LabelChoiceForm):
    def __init__(self, *args: Any, labels: Sequence[str], **kwargs: Any) -> None:
        super().__init__(*args, labels=labels, **kwargs)


class VersionPairForm(forms.Form):
    a = forms.IntegerField(min_value=1, required=False)
    b = forms.IntegerField(min_value=1, required=False)


class MessageTestForm(forms.Form):
    message = forms.CharField(max_length=MESSAGE_MAX, required=False, widget=forms.Textarea(attrs={"rows": 3}))


class ToolSettingsForm(forms.ModelForm):
    """A tool's per-tool settings, served in the policy by name (every source's definition)."""

    redact = KeywordsField(required=False, label="Redact arguments, comma-separated",
                           help_text="Argument names replaced by [REDACTED] before anything is recorded.")

    class Meta:
        model = Tool
        fields = list(SETTINGS_FIELDS)
        labels = {"requires_approval": "Requires approval", "max_result_tokens": "Max result tokens",
                  "on_schema_error": "On a schema error", "retry_policy": "Retry policy (JSON)"}
        widgets = {"retry_policy": forms.Textarea(attrs={"rows": 2})}
