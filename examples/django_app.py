"""Django with cellrate: wrap the WSGI application (or the ASGI one with
cellrate.asgi.RateLimitMiddleware) as in a project's wsgi.py.

    gunicorn examples.django_app:application

A one-file project: every client address may make 100 requests a minute;
/admin/* is exempt. Behind a proxy at 10.0.0.5, name it in trusted_proxies
so that the client is read from X-Forwarded-For (and only then).
"""
import os

import django
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.http import JsonResponse
from django.urls import path

from cellrate.wsgi import RateLimitMiddleware

settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="example-only",
    MIDDLEWARE=[],
)
django.setup()


def hello(request):
    return JsonResponse({"hello": "world", "worker": os.getpid()})


urlpatterns = [path("", hello), path("admin/status", hello)]

application = RateLimitMiddleware(
    get_wsgi_application(),
    os.environ.get("CELLRATE_LIMIT", "100/minute"),
    shared=os.environ.get("CELLRATE_REGION"),
    exempt_paths=["/admin/*"],
    trusted_proxies=["10.0.0.5"],
)
