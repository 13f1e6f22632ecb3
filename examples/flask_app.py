"""Flask with cellrate: the WSGI middleware for the whole app, and a route
decorator for a route of its own.

    gunicorn --workers 4 examples.flask_app:app

Every client address: 100 requests a minute. POST /login: 5 a minute more,
through the decorator. With CELLRATE_REGION set (e.g. /dev/shm/myapp) the
app-wide limit is one limit across every gunicorn worker.
"""
import os

from flask import Flask

from cellrate.flask import RateLimit
from cellrate.wsgi import RateLimitMiddleware

app = Flask(__name__)
app.wsgi_app = RateLimitMiddleware(
    app.wsgi_app,
    os.environ.get("CELLRATE_LIMIT", "100/minute"),
    shared=os.environ.get("CELLRATE_REGION"),
)


@app.get("/")
def hello():
    return {"hello": "world", "worker": os.getpid()}


@app.post("/login")
@RateLimit("5/minute")
def login():
    return {"login": "ok"}
