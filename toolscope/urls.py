from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from toolscope import health

urlpatterns = [
    # Until the dashboard lands, the admin is the operator's home.
    path("", RedirectView.as_view(pattern_name="admin:index"), name="home"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
]
