"""Dashboard URLs: /p/<slug>/... per project, each chart and table with a .csv twin."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard.views import home, keys, overview, policy, runs, session_list, sessions, simulations, tools

app_name = "dashboard"

urlpatterns = [
    path("", home.home, name="home"),
    path("login/", auth_views.LoginView.as_view(template_name="dashboard/login.html", redirect_authenticated_user=True),
         name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("p/<slug:slug>/", overview.overview, name="overview"),
    path("p/<slug:slug>/kpis.csv", overview.kpis_csv, name="kpis_csv"),
    path("p/<slug:slug>/tokens.csv", overview.tokens_csv, name="tokens_csv"),
    path("p/<slug:slug>/top-tools.csv", overview.top_tools_csv, name="top_tools_csv"),
    path("p/<slug:slug>/dead-weight.csv", overview.dead_weight_csv, name="dead_weight_csv"),
    path("p/<slug:slug>/tools/", tools.tool_list, name="tools"),
    path("p/<slug:slug>/tools.csv", tools.tool_list_csv, name="tools_csv"),
    # Tool names and session ids are the agents' own strings: <path:> lets a "/" through, and the
    # .csv routes come first so that ".../calls.csv" is never read as part of a name.
    path("p/<slug:slug>/tools/<path:name>/calls.csv", tools.tool_calls_csv, name="tool_calls_csv"),
    path("p/<slug:slug>/tools/<path:name>/sample.csv", tools.tool_sample_csv, name="tool_sample_csv"),
    path("p/<slug:slug>/tools/<path:name>/settings", tools.tool_settings, name="tool_settings"),
    path("p/<slug:slug>/tools/<path:name>/", tools.tool_detail, name="tool"),
    path("p/<slug:slug>/sessions/", session_list.session_list, name="sessions"),
    path("p/<slug:slug>/sessions.csv", session_list.session_list_csv, name="sessions_csv"),
    path("p/<slug:slug>/sessions/<path:client_id>/turns.csv", sessions.session_turns_csv, name="session_turns_csv"),
    path("p/<slug:slug>/sessions/<path:client_id>/calls.csv", sessions.session_calls_csv, name="session_calls_csv"),
    path("p/<slug:slug>/sessions/<path:client_id>/calls/<int:call_id>.txt", sessions.session_call_text,
         name="session_call_text"),
    path("p/<slug:slug>/sessions/<path:client_id>/", sessions.session_detail, name="session"),
    path("p/<slug:slug>/keys/", keys.key_list, name="keys"),
    path("p/<slug:slug>/keys.csv", keys.key_list_csv, name="keys_csv"),
    path("p/<slug:slug>/keys/new/", keys.key_create, name="key_create"),
    path("p/<slug:slug>/keys/<int:key_id>/revoke/", keys.key_revoke, name="key_revoke"),
    path("p/<slug:slug>/policy/", policy.policy_draft, name="policy"),
    path("p/<slug:slug>/policy/test/", policy.policy_test, name="policy_test"),
    path("p/<slug:slug>/policy/errors/", policy.policy_error_patterns, name="policy_errors"),
    path("p/<slug:slug>/policy/publish/", policy.policy_publish_page, name="policy_publish"),
    path("p/<slug:slug>/policy/versions/", policy.policy_versions, name="policy_versions"),
    path("p/<slug:slug>/policy/versions/<int:number>/label/", policy.policy_label_move, name="policy_label_move"),
    path("p/<slug:slug>/policy/versions/<int:number>/reset/", policy.policy_draft_reset, name="policy_draft_reset"),
    path("p/<slug:slug>/policy/undo/", policy.policy_draft_undo, name="policy_draft_undo"),
    path("p/<slug:slug>/policy/simulations/", simulations.policy_simulations, name="policy_simulations"),
    path("p/<slug:slug>/policy/runs/", runs.policy_runs, name="policy_runs"),
    path("p/<slug:slug>/policy/recommendations/<int:recommendation_id>/", simulations.policy_recommendation,
         name="policy_recommendation"),
    path("p/<slug:slug>/policy/recommendations/<int:recommendation_id>/status.json",
         simulations.policy_recommendation_status, name="policy_recommendation_status"),
    path("p/<slug:slug>/policy/recommendations/start/", simulations.policy_recommendation_start,
         name="policy_recommendation_start"),
    path("p/<slug:slug>/policy/recommendations/apply/", simulations.policy_recommendation_apply,
         name="policy_recommendation_apply"),
    path("p/<slug:slug>/policy/simulations/<int:simulation_id>/", simulations.policy_simulation,
         name="policy_simulation"),
    path("p/<slug:slug>/policy/simulations/<int:simulation_id>/status.json", simulations.policy_simulation_status,
         name="policy_simulation_status"),
    path("p/<slug:slug>/policy/simulations/<int:simulation_id>/cancel/", simulations.policy_simulation_cancel,
         name="policy_simulation_cancel"),
    path("p/<slug:slug>/policy/simulations/<int:simulation_id>/tools.csv", simulations.policy_simulation_csv,
         name="policy_simulation_csv"),
    path("p/<slug:slug>/policy/simulations/<int:simulation_id>/sessions.csv",
         simulations.policy_simulation_sessions_csv, name="policy_simulation_sessions_csv"),
    path("p/<slug:slug>/policy/simulations/<int:simulation_id>/turns.csv",
         simulations.policy_simulation_turns_csv, name="policy_simulation_turns_csv"),
]
