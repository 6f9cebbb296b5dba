from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from api.views.artifacts import ArtifactView
from api.views.ingest import IngestView, TranscriptView
from api.views.otlp import OtlpLogsView, OtlpTracesView
from api.views.policy import PolicyView
from api.views.read import BatchView, OverviewView, SessionsView, SessionView, ToolStatsView
from api.views.recommendations import RecommendationApplyView, RecommendationsView, RecommendationView
from api.views.resolve import ResolveView, ToolEmbeddingsView, ToolSearchView
from api.views.simulations import SimulationsView, SimulationView
from api.views.tools import ToolsView

app_name = "api"

urlpatterns = [
    path("ingest", IngestView.as_view(), name="ingest"),
    path("transcripts", TranscriptView.as_view(), name="transcripts"),
    path("tools", ToolsView.as_view(), name="tools"),
    path("policy", PolicyView.as_view(), name="policy"),
    path("policy/resolve", ResolveView.as_view(), name="policy-resolve"),
    path("tools/search", ToolSearchView.as_view(), name="tools-search"),
    path("tools/embeddings", ToolEmbeddingsView.as_view(), name="tools-embeddings"),
    path("artifacts/<str:artifact_id>", ArtifactView.as_view(), name="artifact"),
    path("otlp/v1/traces", OtlpTracesView.as_view(), name="otlp-traces"),
    path("otlp/v1/logs", OtlpLogsView.as_view(), name="otlp-logs"),
    path("sessions", SessionsView.as_view(), name="sessions"),
    path("sessions/<path:client_id>", SessionView.as_view(), name="session"),
    path("tools/stats", ToolStatsView.as_view(), name="tools-stats"),
    path("overview", OverviewView.as_view(), name="overview"),
    path("batches/<int:batch_id>", BatchView.as_view(), name="batch"),
    path("simulations", SimulationsView.as_view(), name="simulations"),
    path("simulations/<int:simulation_id>", SimulationView.as_view(), name="simulation"),
    path("recommendations", RecommendationsView.as_view(), name="recommendations"),
    path("recommendations/<int:recommendation_id>", RecommendationView.as_view(), name="recommendation"),
    path("recommendations/<int:recommendation_id>/apply", RecommendationApplyView.as_view(),
         name="recommendation-apply"),
    path("schema", SpectacularAPIView.as_view(authentication_classes=[], permission_classes=[]), name="schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="api:schema", authentication_classes=[],
                                                permission_classes=[]), name="docs"),
    path("redoc", SpectacularRedocView.as_view(url_name="api:schema", authentication_classes=[],
                                               permission_classes=[]), name="redoc"),
]
