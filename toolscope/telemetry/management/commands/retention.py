"""manage.py retention: what beat's hourly retention task does, now (services/retention.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from toolscope.telemetry.services.retention import retention_maintain, retention_overview


class Command(BaseCommand):
    help = ("Make the day partitions ahead (PostgreSQL) and expire what each project's retention has passed: "
            "whole day partitions on PostgreSQL, rows on SQLite; sessions, quarantined events and old rollups.")

    def handle(self, *args: Any, **options: Any) -> None:
        report = retention_maintain()
        self.stdout.write(
            f"partitions made: {report.partitions_made}; dropped: {len(report.partitions_dropped)}"
            + (f" ({', '.join(report.partitions_dropped)})" if report.partitions_dropped else "")
        )
        self.stdout.write(f"rows deleted: raw {report.raw_rows_deleted} (SQLite), sessions {report.sessions_deleted}, "
                          f"quarantined {report.quarantined_deleted}, rollups {report.rollup_rows_deleted}")
        state = retention_overview()
        if state.partitions is not None:
            self.stdout.write(f"stored days: {state.first} .. {state.last} ({state.days} days); "
                              f"next expiry: {state.next_expiry}")
