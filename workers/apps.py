from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "workers"
