from django.apps import AppConfig


class PoliciesConfig(AppConfig):
    name = "toolscope.policies"
    label = "policies"
    verbose_name = "Catalog and policies"
