"""Django with cellrate: the middleware in MIDDLEWARE, configured by the
CELLRATE setting, and `@limit` on one view.

    gunicorn examples.django_app:application

A one-file project (SETTINGS is its settings.py): every client address may
make 100 requests a minute; /admin/* is exempt; POST /login allows 5 a minute
on top. Behind a proxy at 10.0.0.5, name it in trusted_proxies so that the
client is read from X-Forwarded-For (and only then). Under ASGI,
get_asgi_application() runs the same middleware and views.
"""
import os

import django
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.http import JsonResponse
from django.urls import path

from cellrate.django import limit

SETTINGS = dict(
    DEBUG=False,
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="example-only",
    MIDDLEWARE=["cellrate.django.RateLimitMiddleware"],
    CELLRATE={
        "limit": os.environ.get("CELLRATE_LIMIT", "100/minute"),
        "shared": os.environ.get("CELLRATE_REGION"),  # None: a limit per process
        "exempt_paths": ["/admin/*"],
        "trusted_proxies": ["10.0.0.5"],
    },
)
if not settings.configured:
    settings.configure(**SETTINGS)
    django.setup()


def hello(request):
    return JsonResponse({"hello": "world", "worker": os.getpid()})


@limit("5/minute", exempt_methods=["GET"])
def login(request):
    return JsonResponse({"token": "example"})


urlpatterns = [path("", hello), path("login", login), path("admin/status", hello)]

application = get_wsgi_application()
