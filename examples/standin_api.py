"""A stand-in for someone else's API, on 127.0.0.1, so the examples run offline.

It answers GET with 200 and a small JSON body while the caller keeps to
5 calls per second, and with 429 when the caller goes faster. The slack (a
burst of 3) is for jitter between a call's start and its arrival here: this
server is a thread per request in the caller's process, so on a loaded
machine two calls started 0.2 s apart can reach it together. A caller with
no limit of its own (or Limiter's default burst of 5) still meets 429s.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import cellrate

POLICY = cellrate.Limiter("5/second", burst=3)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        status = 200 if POLICY.allow() else 429
        body = json.dumps({"path": self.path, "status": status}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # quiet
        pass


def start(handler=Handler):
    """Starts the stand-in (or another `handler`'s server) on a free loopback
    port; returns (base URL, stop function)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop():
        server.shutdown()
        server.server_close()
        thread.join()

    return f"http://127.0.0.1:{server.server_address[1]}", stop
