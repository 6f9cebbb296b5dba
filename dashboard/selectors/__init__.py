"""Read queries behind the dashboard's pages: keyword-only, one aggregate query each where possible,
plain rows out (dicts and dataclasses). Charts and templates never query.

Every number over a time range comes from the hourly rollups (ProjectHourly, ToolHourly); only a
single tool's histograms and recent errors and a single session's page read raw rows, each with a
LIMIT or one session's key.
"""

from dashboard.selectors.common import COMPONENTS, UNATTRIBUTED, projects_for_user
from dashboard.selectors.keys import api_key_get, api_key_list
from dashboard.selectors.overview import (
    Kpi,
    dead_weight,
    overview_kpis,
    slice_choices,
    slice_where,
    token_series,
    tool_usage,
    top_by,
)
from dashboard.selectors.session_list import PAGE_SIZE, SessionPage, session_export, session_facets, session_list
from dashboard.selectors.sessions import (
    DETAIL_PAGE_MAX,
    DETAIL_PAGE_SIZE,
    POSITION,
    Position,
    SessionDetailPage,
    calls_elsewhere,
    position_format,
    position_parse,
    session_calls,
    session_cost,
    session_cost_turns,
    session_detail_page,
    session_get,
    session_transcript,
    session_turns,
    shadow_summary,
)
from dashboard.selectors.tools import (
    SAMPLE_SIZE,
    VersionRow,
    catalog_rows,
    tool_call_sample,
    tool_errors,
    tool_get,
    tool_search_texts,
    tool_seen,
    tool_series,
    tool_table,
    tool_table_arrange,
    tool_versions,
)
from toolscope.telemetry.services.costs import COST_COLUMNS

__all__ = [
    "COMPONENTS", "COST_COLUMNS", "DETAIL_PAGE_MAX", "DETAIL_PAGE_SIZE", "PAGE_SIZE", "POSITION", "SAMPLE_SIZE",
    "UNATTRIBUTED", "Kpi", "Position", "SessionDetailPage", "SessionPage", "VersionRow", "api_key_get", "api_key_list",
    "calls_elsewhere", "catalog_rows", "dead_weight", "overview_kpis", "position_format", "position_parse",
    "projects_for_user", "session_calls", "session_cost", "session_cost_turns", "session_detail_page", "session_export",
    "session_facets", "session_get", "session_list", "session_transcript", "session_turns", "shadow_summary",
    "slice_choices", "slice_where", "token_series", "tool_call_sample", "tool_errors", "tool_get",
    "tool_search_texts", "tool_seen", "tool_series", "tool_table", "tool_table_arrange", "tool_usage",
    "tool_versions", "top_by",
]
