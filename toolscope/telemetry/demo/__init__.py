"""Demo data: a coding agent's tool catalog and a few hundred recorded sessions that use it.

catalog.py   the tools, their schemas, and the draft policy's groups and rules
repo.py      the fake repository the agent works on; shell.py its test and build logs
tasks.py     what each session is asked to do, and what it remembers while doing it
calls*.py    per tool: the arguments a model sends and the output it gets back
failures.py  unknown tools, invalid arguments, denied approvals
generator.py whole sessions, pure and deterministic for a seed and an anchor
store.py     bulk writes; seed.py ties it together for `manage.py seed_demo`
"""
