from django.contrib import admin
from django.urls import include, path

from api import middleware
from toolscope import health

# Outside DEBUG, Django's own 404 and 500 pages: JSON under /api/ (api/middleware.py).
handler404 = middleware.handler404
handler500 = middleware.handler500

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
    # The dashboard owns the root: /, /login/, /p/<slug>/...
    path("", include("dashboard.urls")),
]
