from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "REST API"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from api import schema  # noqa: F401 - registers the OpenAPI authentication extension
        from api.keycache import key_changed
        from toolscope.telemetry.models import ApiKey

        # A changed or deleted key stops working at once, also where it is remembered in memory.
        post_save.connect(key_changed, sender=ApiKey, dispatch_uid="api.keycache.key_changed")
        post_delete.connect(key_changed, sender=ApiKey, dispatch_uid="api.keycache.key_deleted")
