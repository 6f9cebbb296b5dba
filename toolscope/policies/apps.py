from django.apps import AppConfig
from django.core import checks


class PoliciesConfig(AppConfig):
    name = "toolscope.policies"
    label = "policies"
    verbose_name = "Catalog and policies"

    def ready(self) -> None:
        from toolscope.policies.checks import semantic_model_check

        checks.register(semantic_model_check)
