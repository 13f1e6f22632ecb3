"""The app of the scrape test (test_prometheus.py): "/" at 5 per hour and
"POST /login" at 2 per hour for each client, in the shared= directory
CELLRATE_REGION, the policy named "site" registered as "web"; /metrics
(exempt) is prometheus_client's own ASGI app on the default registry. In
front, a limit being rolled out: 3 per hour for each client under dry run
(it refuses nothing), the policy "rollout" registered as "rollout"."""
import os

from prometheus_client import make_asgi_app
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

import cellrate.prometheus
from cellrate.asgi import RateLimitMiddleware


async def hello(request):
    return PlainTextResponse("ok")


app = RateLimitMiddleware(
    Starlette(routes=[Route("/", hello), Route("/login", hello, methods=["POST"]),
                      Mount("/metrics", make_asgi_app())]),
    None, routes={"/": "5/hour", "POST /login": "2/hour"}, name="site",
    exempt_paths=["/metrics", "/metrics/"], shared=os.environ["CELLRATE_REGION"])
cellrate.prometheus.register(app, name="web")
app = RateLimitMiddleware(app, "3/hour", name="rollout", dry_run=True,
                          exempt_paths=["/metrics", "/metrics/"],
                          shared=os.environ["CELLRATE_REGION"])
cellrate.prometheus.register(app, name="rollout")
