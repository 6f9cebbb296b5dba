"""The policy pages: members read the draft and the versions, editors edit the draft, admins publish
and move labels; what the dashboard publishes is what GET /api/v1/policy serves."""

from __future__ import annotations

import json

import pytest
from django import forms
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from toolscope_agent.engine.schemas import schema_hash

from tests.admin.builders import make_context_rule, make_group, make_policy, make_tool
from tests.api.conftest import KeyClient
from tests.factories import make_key
from tests.policies.builders import make_catalog, make_rule
from toolscope.policies.models import (
    CompactionRule,
    ContextRule,
    Policy,
    PolicyAuditAction,
    PolicyAuditEntry,
    PolicyLabel,
    PolicyVersion,
    SelectionMode,
    Tool,
    ToolGroup,
)
from toolscope.policies.services.documents import policy_document_build
from toolscope.policies.services.publish import policy_publish
from toolscope.tokenizer import schema_tokens

pytestmark = pytest.mark.django_db

PAGES = ("policy", "policy_test", "policy_versions")


@pytest.fixture(autouse=True)
def _clean_cache():
    # The served-policy cache outlives a test's transaction; a stale entry would leak between tests.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def tools(project):
    return make_catalog(project)


@pytest.fixture
def policy(project, tools):
    return make_policy(project, always_on=[tools["read_file"], tools["bash"]])


def _url(project, name, *args):
    return reverse(f"dashboard:{name}", args=[project.slug, *args])


def _value(field: forms.BoundField):
    value = field.value()
    if isinstance(field.field, forms.BooleanField):
        return "on" if value else None
    if isinstance(field.field, forms.MultipleChoiceField):  # nothing checked: nothing sent
        return [str(item) for item in value or []] or None
    if isinstance(value, list | tuple):
        return [str(item) for item in value]
    return "" if value is None else str(value)


def _draft_data(client, project) -> dict:
    """The draft form as the page renders it, as a browser would post it back unchanged."""
    editor = client.get(_url(project, "policy")).context["editor"]
    fields = [*editor.draft, *(field for formset in editor.formsets for form in formset for field in form),
              *(field for formset in editor.formsets for field in formset.management_form)]
    data = {field.html_name: _value(field) for field in fields}
    return {name: value for name, value in data.items() if value is not None}


def _names(tools, *names):
    return [str(tools[name].pk) for name in names]


def _publish_as(client, project, django_capture_on_commit_callbacks, **data):
    # The served copy is invalidated on commit: run those callbacks as a real request would.
    with django_capture_on_commit_callbacks(execute=True):
        return client.post(_url(project, "policy_publish"), {"label": "production", "comment": "", **data})


# --- who may do what ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", PAGES)
def test_every_member_reads_the_policy_pages(viewer_client, policy, name):
    assert viewer_client.get(_url(policy.project, name)).status_code == 200


@pytest.mark.parametrize("name", [*PAGES, "policy_publish"])
def test_a_non_member_gets_404_on_every_policy_page(outsider_client, policy, name):
    assert outsider_client.get(_url(policy.project, name)).status_code == 404
    assert outsider_client.post(_url(policy.project, name), {}).status_code == 404


def test_a_non_member_cannot_move_a_label(outsider_client, policy, owner):
    version = policy_publish(policy=policy, user=owner)
    assert outsider_client.post(_url(policy.project, "policy_label_move", version.number),
                                {"label": "staging"}).status_code == 404


def test_anonymous_visitors_are_sent_to_the_login_page(client, policy):
    response = client.get(_url(policy.project, "policy"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("dashboard:login"))


def test_a_viewer_cannot_post_edits(viewer_client, editor_client, policy, tools):
    data = {**_draft_data(editor_client, policy.project), "always_on": _names(tools, "web_fetch")}
    assert viewer_client.post(_url(policy.project, "policy"), data).status_code == 403
    assert {tool.name for tool in policy.always_on.all()} == {"read_file", "bash"}
    assert not PolicyAuditEntry.objects.exists()


def test_a_viewer_sees_the_draft_read_only(viewer_client, policy):
    html = viewer_client.get(_url(policy.project, "policy")).content.decode()
    assert '<fieldset class="plain" disabled>' in html
    assert "Save draft" not in html
    assert "Review and publish" not in html


@pytest.mark.parametrize("client_fixture", ["viewer_client", "editor_client"])
def test_only_admins_publish(request, client_fixture, policy):
    client = request.getfixturevalue(client_fixture)
    assert client.get(_url(policy.project, "policy_publish")).status_code == 403
    assert client.post(_url(policy.project, "policy_publish"), {"label": "production"}).status_code == 403
    assert not PolicyVersion.objects.exists()


@pytest.mark.parametrize("client_fixture", ["viewer_client", "editor_client"])
def test_only_admins_move_labels(request, client_fixture, policy, owner):
    version = policy_publish(policy=policy, user=owner)
    client = request.getfixturevalue(client_fixture)
    response = client.post(_url(policy.project, "policy_label_move", version.number), {"label": "staging"})
    assert response.status_code == 403
    assert not PolicyLabel.objects.filter(name="staging").exists()


# --- editing the draft -------------------------------------------------------------------------


def test_the_page_shows_the_cost_of_the_always_on_set(viewer_client, policy, tools):
    """Counted from the definitions, as the Test page and /policy/resolve count them."""
    response = viewer_client.get(_url(policy.project, "policy"))
    html = response.content.decode()
    cost = {name: schema_tokens(name=tool.name, description=tool.description, input_schema=tool.input_schema,
                                schema_hash=schema_hash(tool.name, tool.description, tool.input_schema),
                                encoding=policy.project.encoding)
            for name, tool in tools.items()}
    total = cost["read_file"] + cost["bash"]
    assert response.context["always_on_tokens"] == total > 0
    assert f'<strong data-token-sum="always_on">{total}</strong>' in html
    assert sum(html.count(f'data-tokens="{tokens}"') for tokens in set(cost.values())) == len(tools)


def test_an_editor_saves_the_always_on_set_and_the_change_is_audited(editor_client, editor, policy, tools):
    data = {**_draft_data(editor_client, policy.project), "always_on": _names(tools, "read_file", "git_diff")}
    response = editor_client.post(_url(policy.project, "policy"), data)
    assert response.status_code == 302
    assert {tool.name for tool in policy.always_on.all()} == {"read_file", "git_diff"}
    entry = PolicyAuditEntry.objects.get()
    assert (entry.action, entry.user) == (PolicyAuditAction.DRAFT_CHANGED, editor)
    assert entry.summary == "draft: selection.always_on: + git_diff, - bash"
    assert "selection.always_on: + git_diff, - bash" in editor_client.get(response["Location"]).content.decode()


def test_saving_without_a_change_records_and_writes_nothing(editor_client, policy):
    response = editor_client.post(_url(policy.project, "policy"), _draft_data(editor_client, policy.project))
    assert response.status_code == 302
    assert not PolicyAuditEntry.objects.exists()
    assert Policy.objects.get(pk=policy.pk).updated_at == policy.updated_at


def test_an_editor_adds_a_group_a_context_rule_and_a_compaction_rule(editor_client, policy, tools):
    data = _draft_data(editor_client, policy.project)
    data.update({"mode": SelectionMode.CONTEXT_RULES, "groups-0-name": "git",
                 "groups-0-tools": _names(tools, "git_status", "git_diff"),
                 "compaction-0-tools": "bash*", "compaction-0-max_tokens": "2000",
                 "compaction-0-strategy": "head_tail"})
    assert editor_client.post(_url(policy.project, "policy"), data).status_code == 302
    group = ToolGroup.objects.get(policy=policy)
    data = _draft_data(editor_client, policy.project)
    data.update({"rules-0-name": "version control", "rules-0-keywords": "commit, diff , ,branch",
                 "rules-0-groups": [str(group.pk)]})
    assert editor_client.post(_url(policy.project, "policy"), data).status_code == 302

    policy.refresh_from_db()
    rule = ContextRule.objects.get(policy=policy)
    assert policy.mode == SelectionMode.CONTEXT_RULES
    assert {tool.name for tool in group.tools.all()} == {"git_status", "git_diff"}
    assert (rule.keywords, list(rule.groups.all())) == (["commit", "diff", "branch"], [group])
    assert CompactionRule.objects.filter(policy=policy, tools="bash*", max_tokens=2000).exists()
    assert PolicyAuditEntry.objects.count() == 2


def test_an_editor_sets_a_rule_on_tools_called_before_the_rule_window_and_search_always_on(
        editor_client, policy, tools):
    group = ToolGroup.objects.create(policy=policy, name="git")
    group.tools.set([tools["git_diff"]])
    data = _draft_data(editor_client, policy.project)
    data.update({"mode": SelectionMode.CONTEXT_RULES, "rule_window": "2", "search_always_on": "on",
                 "rules-0-name": "after status", "rules-0-after_tools": "git_status, ,bash",
                 "rules-0-groups": [str(group.pk)]})
    assert editor_client.post(_url(policy.project, "policy"), data).status_code == 302
    policy.refresh_from_db()
    rule = ContextRule.objects.get(policy=policy)
    assert (rule.keywords, rule.after_tools) == ([], ["git_status", "bash"])  # no keyword needed
    assert (policy.rule_window, policy.search_always_on) == (2, True)
    document = policy_document_build(policy=policy)
    assert document["selection"]["context_rules"][0]["after_tools"] == ["git_status", "bash"]
    assert document["selection"]["rule_window"] == 2 and "tool_search" in document["selection"]["always_on"]
    html = editor_client.get(_url(policy.project, "policy")).content.decode()
    assert 'value="git_status, bash"' in html


def test_context_rules_keep_the_order_given(editor_client, policy):
    first = make_context_rule(policy, name="first", position=0)
    second = make_context_rule(policy, name="second", position=1)
    data = _draft_data(editor_client, policy.project)
    data.update({"rules-0-ORDER": "2", "rules-1-ORDER": "1"})
    assert editor_client.post(_url(policy.project, "policy"), data).status_code == 302
    assert list(ContextRule.objects.filter(policy=policy).values_list("name", flat=True)) == ["second", "first"]
    summary = PolicyAuditEntry.objects.get().summary
    assert summary == "draft: selection.context_rules: order first, second → second, first"
    assert {first.pk, second.pk} == set(ContextRule.objects.values_list("pk", flat=True))


def test_deleting_a_group_drops_it_from_the_rules_that_load_it(editor_client, policy, tools):
    group = make_group(policy, "git", [tools["git_status"]])
    rule = make_context_rule(policy, groups=[group], name="vcs")
    data = {**_draft_data(editor_client, policy.project), "groups-0-DELETE": "on"}
    assert editor_client.post(_url(policy.project, "policy"), data).status_code == 302
    assert not ToolGroup.objects.exists()
    assert list(rule.groups.all()) == []


def test_a_dangerous_regex_is_refused_inline_and_nothing_is_saved(editor_client, policy):
    data = {**_draft_data(editor_client, policy.project), "rules-0-name": "slow", "rules-0-regex": "(a+)+$"}
    response = editor_client.post(_url(policy.project, "policy"), data)
    assert response.status_code == 400
    assert "nested quantifiers" in response.content.decode()
    assert "Nothing was saved" in response.content.decode()
    assert not ContextRule.objects.exists()
    assert not PolicyAuditEntry.objects.exists()


@pytest.mark.parametrize(("regex", "shown"), [
    (r".*.*.*.*=", "can take polynomial time"),
    (r"(\w+) \1", "RE2, which matches rules, cannot compile it (invalid escape sequence: \\1)"),
])
def test_a_regex_that_is_polynomial_or_that_re2_refuses_is_refused_inline(editor_client, policy, regex, shown):
    data = {**_draft_data(editor_client, policy.project), "rules-0-name": "slow", "rules-0-regex": regex}
    response = editor_client.post(_url(policy.project, "policy"), data)
    assert response.status_code == 400
    assert shown in response.content.decode()
    assert not ContextRule.objects.exists()


def test_publishing_problems_of_the_draft_are_shown_where_they_are(viewer_client, policy):
    CompactionRule.objects.create(policy=policy, tools="nothing_*", max_tokens=100)
    Policy.objects.filter(pk=policy.pk).update(search_top_k=30, search_max_top_k=20)
    response = viewer_client.get(_url(policy.project, "policy"))
    editor = response.context["editor"]
    assert editor.problems["compaction"] == ["compaction_rules[0].tools: 'nothing_*' matches no tool of the catalog"]
    assert editor.problems["draft"] == ["search_top_k: 30 is above search_max_top_k (20)"]
    assert editor.compaction.forms[0].problems == ["'nothing_*' matches no tool of the catalog"]
    assert "Publishing is blocked by" in response.content.decode()


def test_a_problem_of_a_rule_marks_that_rule_even_with_dots_in_its_name(viewer_client, policy):
    ContextRule.objects.create(policy=policy, name="fine", keywords=["test"])
    ContextRule.objects.create(policy=policy, name="v1.2 rule", keywords=[], regex="")
    editor = viewer_client.get(_url(policy.project, "policy")).context["editor"]
    assert editor.problems["rules"] == ["context_rules.v1.2 rule: needs keywords, a regex or tools called before"]
    assert [getattr(form, "problems", []) for form in editor.rules.initial_forms] == [
        [], ["needs keywords, a regex or tools called before"]]


def test_an_editor_creates_the_draft_of_a_project_without_one(editor_client, project, tools):
    data = {**_draft_data(editor_client, project), "always_on": _names(tools, "bash")}
    assert editor_client.post(_url(project, "policy"), data).status_code == 302
    assert [tool.name for tool in Policy.objects.get(project=project).always_on.all()] == ["bash"]
    assert PolicyAuditEntry.objects.get().summary == "draft created"


# --- testing a message -------------------------------------------------------------------------


def test_a_message_gets_the_tools_of_the_rules_it_matches(viewer_client, policy, tools):
    Policy.objects.filter(pk=policy.pk).update(mode=SelectionMode.CONTEXT_RULES)
    make_rule(policy, "vcs", keywords=["diff"], groups=[make_group(policy, "git", [tools["git_diff"]])])
    result = viewer_client.get(_url(policy.project, "policy_test"), {"message": "show me the diff"}).context["result"]
    assert {tool.name: tool.reason for tool in result.tools} == {
        "bash": "always_on", "git_diff": "rule:vcs", "read_file": "always_on"}
    assert result.deferred == ["edit_file", "git_status", "tool_search", "web_fetch"]
    assert result.tokens == sum(tool.tokens for tool in result.tools)
    assert 0 < result.tokens < result.all_tokens


def test_a_draft_with_search_always_on_is_tested_with_toolscopes_search_tool(viewer_client, policy, tools):
    tools["tool_search"].delete()  # the catalog has no search tool of its own
    Policy.objects.filter(pk=policy.pk).update(mode=SelectionMode.CONTEXT_RULES, search_always_on=True)
    result = viewer_client.get(_url(policy.project, "policy_test"), {"message": "hello"}).context["result"]
    assert {tool.name: tool.reason for tool in result.tools} == {
        "bash": "always_on", "read_file": "always_on", "tool_search": "always_on"}
    assert result.tokens == sum(tool.tokens for tool in result.tools)


def test_a_message_under_mode_all_gets_every_tool(viewer_client, policy, tools):
    result = viewer_client.get(_url(policy.project, "policy_test"), {"message": "hello"}).context["result"]
    assert len(result.tools) == len(tools)
    assert result.saved == 0


# --- publishing and versions -------------------------------------------------------------------


def test_the_publish_page_shows_what_changes_against_the_label(admin_client, policy, tools, owner):
    policy_publish(policy=policy, user=owner)
    policy.always_on.add(tools["git_diff"])
    response = admin_client.get(_url(policy.project, "policy_publish"))
    assert response.context["current"] == 1
    assert response.context["changes"] == ["selection.always_on: + git_diff"]


def test_publishing_serves_the_new_document_to_agents(admin_client, editor_client, policy, tools, owner,
                                                       django_capture_on_commit_callbacks):
    data = {**_draft_data(editor_client, policy.project), "always_on": _names(tools, "read_file", "web_fetch")}
    editor_client.post(_url(policy.project, "policy"), data)
    response = _publish_as(admin_client, policy.project, django_capture_on_commit_callbacks, comment="web access")
    assert response.status_code == 302
    version = PolicyVersion.objects.get()
    assert (version.number, version.comment, version.published_by) == (1, "web access", owner)

    agent = KeyClient(make_key(policy.project, scopes=["policy:read"]).secret)
    served = agent.get("/api/v1/policy")
    assert served.status_code == 200
    document = json.loads(served.content)
    assert (document["version"], document["label"]) == (1, "production")
    assert document["selection"]["always_on"] == ["read_file", "web_fetch"]


def test_a_draft_that_cannot_be_published_shows_why(admin_client, policy, django_capture_on_commit_callbacks):
    Policy.objects.filter(pk=policy.pk).update(search_top_k=30, search_max_top_k=20)
    response = _publish_as(admin_client, policy.project, django_capture_on_commit_callbacks)
    assert response.status_code == 400
    assert "30 is above search_max_top_k (20)" in response.content.decode()
    assert not PolicyVersion.objects.exists()


def test_a_bad_label_is_refused(admin_client, policy, django_capture_on_commit_callbacks):
    response = _publish_as(admin_client, policy.project, django_capture_on_commit_callbacks, label="no spaces")
    assert response.status_code == 400
    assert not PolicyVersion.objects.exists()


def test_the_versions_page_lists_versions_labels_and_a_diff(viewer_client, policy, tools, owner):
    policy_publish(policy=policy, user=owner, comment="first")
    policy.always_on.add(tools["git_diff"])
    policy_publish(policy=policy, user=owner, comment="with git_diff", label="staging")
    response = viewer_client.get(_url(policy.project, "policy_versions"), {"a": 1, "b": 2})
    versions = response.context["versions"]
    assert [(v.number, v.comment, v.published_by, v.labels) for v in versions] == [
        (2, "with git_diff", "owner", ["staging"]), (1, "first", "owner", ["production"])]
    assert response.context["diff"] == ["selection.always_on: + git_diff"]
    assert "Move here" not in response.content.decode()


def test_moving_a_label_back_is_a_rollback_agents_see(admin_client, policy, tools, owner,
                                                       django_capture_on_commit_callbacks):
    first = policy_publish(policy=policy, user=owner)
    policy.always_on.add(tools["git_diff"])
    policy_publish(policy=policy, user=owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(_url(policy.project, "policy_label_move", first.number), {"label": "production"})
    assert response.status_code == 302
    assert PolicyLabel.objects.get(name="production").version == first
    assert PolicyAuditEntry.objects.filter(action=PolicyAuditAction.ROLLBACK).count() == 1
    agent = KeyClient(make_key(policy.project, scopes=["policy:read"]).secret)
    assert json.loads(agent.get("/api/v1/policy").content)["version"] == 1


def test_moving_a_label_to_another_projects_version_is_404(admin_client, policy, other_project, owner):
    other = make_policy(other_project)
    make_tool(other_project, "bash")
    policy_publish(policy=other, user=owner)
    response = admin_client.post(_url(policy.project, "policy_label_move", 1), {"label": "production"})
    assert response.status_code == 404


# --- query counts ------------------------------------------------------------------------------


def _count(client, url, **params) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, params)
    assert response.status_code == 200, url
    return len(queries)


def _page_counts(client, project) -> dict[str, int]:
    return {
        "draft": _count(client, _url(project, "policy")),
        "test": _count(client, _url(project, "policy_test"), message="run the test"),
        "publish": _count(client, _url(project, "policy_publish")),
        "versions": _count(client, _url(project, "policy_versions"), a=1, b=2),
    }


def _grow(policy, owner, rows: int) -> None:
    start = policy.groups.count()
    tools = [make_tool(policy.project, f"extra_{n:02d}") for n in range(start, start + rows)]
    policy.always_on.add(*tools)
    policy.allowed.add(*tools, *policy.project.tools.all())
    for n in range(start, start + rows):
        group = make_group(policy, f"group-{n}", tools[: n - start + 1])
        make_context_rule(policy, groups=[group], name=f"rule {n}", position=n)
        CompactionRule.objects.create(policy=policy, tools="extra_*", max_tokens=100 + n, position=n)
        policy_publish(policy=policy, user=owner, comment=f"v{n}")


def test_policy_pages_cost_the_same_for_3_rows_as_for_30(admin_client, policy, owner):
    _grow(policy, owner, 3)
    small = _page_counts(admin_client, policy.project)
    _grow(policy, owner, 27)
    assert _page_counts(admin_client, policy.project) == small
    assert max(small.values()) <= 23


# session + user + project/membership + switcher, then the page's own queries: the draft page's
# draft with its tool sets (3), catalog, groups (2), rules (2), compaction rules, labels and
# policy_validate (5), the last change to undo; the test and publish pages' draft document (9), and
# the publish page's labels, newest version (for a draft identical to one) and the keys that poll
# (as the versions page's). The draft and test pages count the definitions catalog_view picks: the
# agents with a known set, the names with several definitions, and (the draft page) the catalog's.
PINNED = [
    ("policy", {}, 23), ("policy_test", {"message": "run the test"}, 17), ("policy_publish", {}, 20),
    ("policy_versions", {"a": 1, "b": 2}, 9),
]


@pytest.mark.parametrize(("name", "params", "queries"), PINNED)
def test_policy_page_query_counts_are_pinned(admin_client, policy, owner, django_assert_num_queries, name, params,
                                             queries):
    _grow(policy, owner, 2)
    with django_assert_num_queries(queries):
        assert admin_client.get(_url(policy.project, name), params).status_code == 200


@pytest.mark.django_db
def test_the_editor_lists_a_name_with_two_sources_once(editor_client, project, policy, tools):
    """A test agent's own `bash` beside the catalog's: the policy refers to tools by name, so the
    draft editor offers the name once (its first-registered definition), not one box per source."""
    from toolscope.policies.services.catalog import catalog_upsert

    catalog_upsert(project=project, definitions=[{"name": "bash", "description": "Run it", "source": "test-agent",
                                                  "input_schema": {"type": "object"}}])
    assert Tool.objects.filter(project=project, name="bash").count() == 2
    rows = editor_client.get(_url(project, "policy")).context["tool_rows"]
    assert [row["name"] for row in rows].count("bash") == 1
    assert next(row for row in rows if row["name"] == "bash")["id"] == tools["bash"].pk
