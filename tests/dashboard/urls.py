"""Every dashboard URL of a project, for tests that must cover them all."""

from __future__ import annotations

from django.urls import reverse

from tests.dashboard.builders import Activity

PAGES = ("overview", "tools", "sessions", "keys")
CSVS = ("kpis_csv", "tokens_csv", "top_tools_csv", "dead_weight_csv", "tools_csv", "sessions_csv", "keys_csv")
TOOL_PAGES = ("tool", "tool_calls_csv", "tool_sample_csv")
SESSION_PAGES = ("session", "session_turns_csv", "session_calls_csv")


def page_urls(activity: Activity) -> list[str]:
    """The HTML pages (GET) of the activity's project."""
    slug = activity.project.slug
    return [
        *(reverse(f"dashboard:{name}", args=[slug]) for name in PAGES),
        reverse("dashboard:tool", args=[slug, "read_file"]),
        reverse("dashboard:session", args=[slug, activity.sessions[0].client_id]),
    ]


def get_urls(activity: Activity) -> list[str]:
    """Every GET URL of the project: pages and CSV exports."""
    slug, client_id = activity.project.slug, activity.sessions[0].client_id
    return [
        *(reverse(f"dashboard:{name}", args=[slug]) for name in (*PAGES, *CSVS)),
        *(reverse(f"dashboard:{name}", args=[slug, "read_file"]) for name in TOOL_PAGES),
        *(reverse(f"dashboard:{name}", args=[slug, client_id]) for name in SESSION_PAGES),
    ]


def post_urls(activity: Activity, key_id: int) -> list[str]:
    slug = activity.project.slug
    return [reverse("dashboard:key_create", args=[slug]), reverse("dashboard:key_revoke", args=[slug, key_id])]
