"""A done run's headline (issue 28, item 8): the Runs page lists runs from it without loading their
results. Runs done before it get theirs from their stored result, computed here as
services/simulation_runs.simulation_headline and services/recommendations.recommendation_headline
do (copied: a migration must not change when the services do)."""

from django.db import migrations, models


def _simulation(result):
    dollars = result.get("dollars") or {}
    return {"sessions": result["sessions"], "saved_share": result["saved_share"],
            "net_saved_share": result.get("net_saved_share", result["saved_share"]),
            "miss_rate": result["miss_rate"], "hard_miss_rate": result.get("hard_miss_rate", result["miss_rate"]),
            "dollars_saved": dollars.get("saved") if dollars.get("priced_sessions") else None}


def _recommendation(result):
    best = next((row for row in result["candidates"] if row["name"] == result["recommended"]), None)
    headline = {"sessions": result["sessions"], "candidates": len(result["candidates"]),
                "recommended": result["recommended"]}
    if best is not None:
        headline.update(net_saved_share=best.get("net_saved_share", best["saved_share"]),
                        hard_miss_rate=best.get("hard_miss_rate", best["miss_rate"]),
                        dollars_saved_share=best["net_dollars_share"] if best.get("priced_sessions") else None)
    return headline


def headlines_fill(apps, schema_editor):
    for name, summary in (("Simulation", _simulation), ("Recommendation", _recommendation)):
        model = apps.get_model("policies", name)
        done = model.objects.filter(status="done", headline__isnull=True, result__isnull=False)
        for pk, result in done.values_list("pk", "result").iterator(chunk_size=100):
            try:
                headline = summary(result)
            except (KeyError, TypeError):  # a result of an older shape: listed without a headline
                continue
            model.objects.filter(pk=pk).update(headline=headline)


class Migration(migrations.Migration):

    dependencies = [
        ('policies', '0014_search_defer_loading'),
    ]

    operations = [
        migrations.AddField(
            model_name='recommendation',
            name='headline',
            field=models.JSONField(blank=True, help_text="A done run's summary for the Runs page (sessions, savings, misses).", null=True),
        ),
        migrations.AddField(
            model_name='simulation',
            name='headline',
            field=models.JSONField(blank=True, help_text="A done run's summary for the Runs page (sessions, savings, misses).", null=True),
        ),
        migrations.RunPython(headlines_fill, migrations.RunPython.noop),
    ]
