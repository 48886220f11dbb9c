"""The HTTP plumbing every loopback test server shares (stdlib only, so the stand-ins also run where pytest is
absent, e.g. on a lent GPU machine): a quiet JSON handler and a server in a daemon thread."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JSONHandler(BaseHTTPRequestHandler):
    "A quiet HTTP/1.1 handler with `_send(code, payload, headers)` for JSON (or bytes) replies."

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep test output clean
        pass

    def _read_body(self) -> bytes | None:
        """The request's body, or None when the client went away before sending all of it (a killed client): a server
        neither answers nor counts such a request, and the connection is closed."""
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        if len(data) < length:
            self.close_connection = True
            return None
        return data

    def _send(self, code, payload, headers=None):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests)


class ThreadedServer:
    "Serve a handler class on a loopback port in a daemon thread: `start(handler)` -> port, `stop()`."

    def start(self, handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1", port: int = 0) -> int:
        self.server = ThreadingHTTPServer((host, port), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self.server.server_address[1]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class LoopbackServer:
    """Base of the loopback test servers, used as context managers: `__enter__` builds its handler class and calls
    `_serve(handler, host, port)` (-> the port); leaving the block stops the server."""

    def _serve(self, handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1", port: int = 0) -> int:
        self._serving = ThreadedServer()
        return self._serving.start(handler, host, port)

    def __exit__(self, *exc):
        self._serving.stop()


def serve_from_command_line(server, announce) -> None:
    "A stand-in started from the command line: enter `server`, print `announce(server)` (where it listens), serve until Ctrl-C."
    import time

    with server as s:
        print(announce(s), flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
