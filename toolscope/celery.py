"""The Celery application. Configuration comes from Django settings prefixed CELERY_."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")

app = Celery("toolscope")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"])
