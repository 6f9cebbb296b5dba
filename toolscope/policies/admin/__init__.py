"""The Django admin of the catalog and policies."""

from toolscope.policies.admin import audit, policies, tools, versions  # noqa: F401  (registers the admins)
