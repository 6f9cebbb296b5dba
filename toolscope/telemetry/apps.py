from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "toolscope.telemetry"
    label = "telemetry"
    verbose_name = "Telemetry"
