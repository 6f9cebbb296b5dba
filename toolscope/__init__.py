import os

# One BLAS thread per process, set before numpy is first imported (its OpenBLAS reads it once): a
# server runs many processes, and the only matrix work in a request is tool_search embedding its
# query; OpenBLAS's own threads on top of them made that 9x slower on a busy 2-core machine
# (bench/search_latency.py: median 643 ms against 73 ms). An operator's own setting wins.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

# The Celery app is imported with Django so that @shared_task binds to it.
from toolscope.celery import app as celery_app  # noqa: E402

__all__ = ("celery_app",)
