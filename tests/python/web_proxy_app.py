"""The app of the proxy tests (test_web_servers.py): CELLRATE_LIMIT for every
client, CELLRATE_TRUSTED_PROXIES (comma-separated, may be empty) for
`trusted_proxies`, CELLRATE_REGION (optional) for `shared`; GET /peer (exempt)
answers the peer the app was given."""
import os

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from cellrate.asgi import RateLimitMiddleware


async def hello(request):
    return PlainTextResponse("ok")


async def peer(request):
    return PlainTextResponse(request.scope["client"][0])


trusted = [item for item in os.environ.get("CELLRATE_TRUSTED_PROXIES", "").split(",") if item]
app = RateLimitMiddleware(Starlette(routes=[Route("/", hello), Route("/peer", peer)]),
                          os.environ["CELLRATE_LIMIT"], trusted_proxies=trusted,
                          exempt_paths=["/peer"], shared=os.environ.get("CELLRATE_REGION"))
