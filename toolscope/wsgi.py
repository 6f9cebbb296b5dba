import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")
application = get_wsgi_application()

# After setup: the layer reads settings and the cache. It answers agents' warm policy polls
# (304) itself and passes everything else to Django (api/fastpath.py).
from api.fastpath import policy_revalidation  # noqa: E402
from toolscope.chunked import chunked_bodies  # noqa: E402
from toolscope.deadline import request_deadline  # noqa: E402

# Chunked request bodies get their length before Django reads them (toolscope/chunked.py).
application = policy_revalidation(chunked_bodies(application))

# Outermost: a request still running after WEB_REQUEST_TIMEOUT seconds, even one stuck in C code
# holding the GIL, ends this process and granian starts another (toolscope/deadline.py).
application = request_deadline(application)

# Everything imported so far lives as long as the process. Frozen, the collector never walks it
# again: a full collection over Django's import graph paused a worker for ~75 ms under load, which
# every request queued on that worker waited out (bench/RESULTS.md, policy polls).
gc.collect()
gc.freeze()
