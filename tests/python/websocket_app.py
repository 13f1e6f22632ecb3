"""The app of the WebSocket server tests (test_websocket.py), pure ASGI, run by
uvicorn with 2 workers on one shared directory (CELLRATE_REGION):

- every connection's first message, every answer, names the worker (its pid),
  and so does a refusal's body;
- /handshake: 5 per hour per client, for a GET and a WebSocket handshake alike;
- /messages: each connection's messages at 5 per hour, and every connection of
  a key at 8 per hour (a KeyedLimiter in the directory: one for both workers);
  a refused message closes the connection with 1008;
- /drop: each connection's messages cost their bytes, 10 per hour; a refused
  message is dropped ("?" costs nothing: it is always answered);
- 2 requests or connections of one client at once (concurrency).
"""

import os

import cellrate
from cellrate.asgi import RateLimitMiddleware
from cellrate.websocket import MessageLimit, message_size

REGION = os.environ["CELLRATE_REGION"]
PID = str(os.getpid())


async def echo(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": PID.encode()})
        return
    if scope["type"] != "websocket":
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": PID})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        await send({"type": "websocket.send", "text": message.get("text"),
                    "bytes": message.get("bytes")})


os.makedirs(REGION, mode=0o700, exist_ok=True)
closing = MessageLimit(echo, "5/hour", per_key=cellrate.KeyedLimiter(
    "8/hour", shared=os.path.join(REGION, "messages")))
dropping = MessageLimit(echo, "10/hour", on_refusal="drop",
                        cost=lambda message: 0 if message.get("text") == "?" else
                        message_size(message))


async def by_path(scope, receive, send):
    app = dropping if scope.get("path") == "/drop" else closing
    await app(scope, receive, send)


app = RateLimitMiddleware(by_path, None, routes={"/handshake": "5/hour"}, concurrency=2,
                          shared=REGION, body=f"refused by {PID}")
