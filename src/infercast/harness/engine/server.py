"""An OpenAI-compatible HTTP endpoint for the engine (``POST /v1/completions``, streaming or not;
``GET /v1/models``), so standard clients and benchmark tools can drive it.

Standard library only (``http.server``): HTTP threads hand requests to one engine thread, which steps the
engine whenever it has work and streams each sampled token back as a server-sent event. The weights are
random, so there is no tokenizer: a string prompt becomes one token per UTF-8 byte, a list of integers is
taken as token ids, and each output token is returned as its id (text ``" <id>"``). ``max_tokens`` tokens are
always generated (``ignore_eos``: there is no end-of-sequence token).
"""

from __future__ import annotations

import itertools
import json
import queue
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from infercast.errors import InfercastError
from infercast.files import parse_json
from infercast.harness.engine.clock import WallClock
from infercast.harness.engine.runtime import Engine, Sequence

DEFAULT_MAX_TOKENS = 16
MAX_BODY_BYTES = 16 * 1024**2
"""Largest request body read (16 MiB): a prompt of token ids past any KV pool the engine holds fits well within."""
LISTEN_BACKLOG = 1024
"""Connections the kernel queues before ``accept``: the standard library's 5 refused most of a 200-request burst
from 50 clients (issue 37)."""
_DONE = object()


class _HTTPServer(ThreadingHTTPServer):
    """One thread per connection, a deep accept queue, and a client that hangs up is not an error."""

    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that disconnects (broken pipe, reset) is routine; anything else is one line, no traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            return
        print(f"serve: request from {client_address[0]} failed: {type(exc).__name__}: {exc}", file=sys.stderr)


class EngineServer:
    """The engine behind an HTTP server on ``host:port`` (port 0: any free port, see :attr:`port`)."""

    def __init__(self, engine: Engine, *, host: str = "127.0.0.1", port: int = 8000, model_name: str | None = None):
        self.engine = engine
        self.model_name = model_name or engine.model.spec.id
        self.clock = WallClock()
        self.inbox: queue.Queue[tuple[int, list[int], int, queue.Queue[Any]]] = queue.Queue()
        self.streams: dict[int, queue.Queue[Any]] = {}
        self.ids = itertools.count()
        self.stopped = threading.Event()
        self.error: BaseException | None = None
        engine.on_token = self._token
        engine.on_finish = self._finished
        self.http = _HTTPServer((host, port), _handler(self))
        self.port = self.http.server_address[1]
        self._threads = [
            threading.Thread(target=self._loop, daemon=True),
            threading.Thread(target=self.http.serve_forever, daemon=True),
        ]

    def start(self) -> EngineServer:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.http.shutdown()
        self.http.server_close()
        for t in self._threads:
            t.join(timeout=5)

    def submit(self, prompt: list[int], max_tokens: int) -> queue.Queue[Any]:
        """Queue a request; its tokens (then a done marker, or an exception) arrive on the returned queue."""
        out: queue.Queue[Any] = queue.Queue()
        self.inbox.put((next(self.ids), prompt, max_tokens, out))
        return out

    # ----- the engine thread ----------------------------------------------------------------------------------
    def _token(self, seq: Sequence, token: int, t: float) -> None:
        self.streams[seq.id].put(token)

    def _finished(self, seq: Sequence, t: float) -> None:
        self.streams.pop(seq.id).put(_DONE)
        del self.engine.seqs[seq.id]  # a server runs forever: finished requests are not kept

    def _loop(self) -> None:
        engine = self.engine
        while not self.stopped.is_set():
            try:
                timeout = 0.05 if engine.idle else 0.0
                while True:
                    i, prompt, max_tokens, out = self.inbox.get(timeout=timeout) if timeout else self.inbox.get_nowait()
                    timeout = 0.0
                    self.streams[i] = out
                    try:
                        engine.add_request(i, prompt, max_tokens, self.clock.now())
                    except Exception as exc:  # a bad request fails alone
                        self.streams.pop(i).put(exc)
            except queue.Empty:
                pass
            if engine.idle:
                continue
            try:
                if not engine.step(self.clock):
                    time.sleep(0.001)
            except Exception as exc:  # the engine cannot go on: fail every open request, then stop
                self.error = exc
                for out in self.streams.values():
                    out.put(exc)
                self.streams.clear()
                self.stopped.set()


def _handler(server: EngineServer) -> type[BaseHTTPRequestHandler]:
    """The request handler class bound to ``server`` (``http.server`` builds one handler per request)."""

    class Handler(_CompletionHandler):
        engine_server = server

    return Handler


class _CompletionHandler(BaseHTTPRequestHandler):
    """``GET /v1/models`` and ``POST /v1/completions`` (streaming or not) against :attr:`engine_server`."""

    protocol_version = "HTTP/1.1"
    engine_server: EngineServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _json(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, code: int, message: str, param: str | None = None) -> None:
        self._json(code, {"error": {"message": message, "type": "invalid_request_error", "param": param}})

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            name = self.engine_server.model_name
            self._json(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "infercast"}]})
        else:
            self._error(404, f"no route {self.path}; routes: GET /v1/models, POST /v1/completions")

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/completions":
            self._error(404, f"no route {self.path}; routes: GET /v1/models, POST /v1/completions")
            return
        body = self._body()
        if body is None:
            return
        request = self._request(body)
        if request is None:
            return
        tokens, max_tokens = request
        out = self.engine_server.submit(tokens, max_tokens)
        if bool(body.get("stream", False)):
            self._stream(out)
        else:
            self._whole(out, len(tokens))

    def _request(self, body: dict[str, Any]) -> tuple[list[int], int] | None:
        """The prompt's token ids and ``max_tokens`` of a completion request, or None after a 400."""
        engine = self.engine_server.engine
        vocab = engine.model.spec.vocab_size
        max_context = engine.pool.num_blocks * engine.bs
        prompt = body.get("prompt")
        if isinstance(prompt, str) and prompt:
            tokens = [b % vocab for b in prompt.encode()]
        elif isinstance(prompt, list) and prompt and all(type(t) is int and 0 <= t < vocab for t in prompt):
            tokens = list(prompt)  # type(t) is int: JSON true/false are not token ids
        else:
            self._error(400, f"must be a non-empty string or a list of token ids in [0, {vocab})", "prompt")
            return None
        max_tokens = body.get("max_tokens", DEFAULT_MAX_TOKENS)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            self._error(400, f"must be an integer >= 1, got {max_tokens!r}", "max_tokens")
            return None
        if len(tokens) + max_tokens > max_context:
            self._error(
                400,
                f"prompt ({len(tokens)}) + max_tokens ({max_tokens}) exceeds the engine's {max_context} KV tokens",
                "max_tokens",
            )
            return None
        return tokens, max_tokens

    def _chunk_maker(self) -> Callable[[str, str | None], dict[str, Any]]:
        """``chunk(text, finish_reason)``: one completion object of this request (one id and creation time)."""
        rid = f"cmpl-{time.time_ns():x}"
        created = int(time.time())
        model = self.engine_server.model_name

        def chunk(text: str, finish: str | None) -> dict[str, Any]:
            return {
                "id": rid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
            }

        return chunk

    def _stream(self, out: queue.Queue[Any]) -> None:
        """Send each token as a server-sent event as it is sampled, then the finish event and ``[DONE]``."""
        chunk = self._chunk_maker()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        while True:
            item = out.get()
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                self._event({"error": {"message": str(item), "type": "server_error"}})
                return
            self._event(chunk(f" {item}", None))
        self._event(chunk("", "length"))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _whole(self, out: queue.Queue[Any], prompt_tokens: int) -> None:
        """Wait for every token, then send one completion with its usage."""
        chunk = self._chunk_maker()
        generated: list[int] = []
        while True:
            item = out.get()
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                self._json(500, {"error": {"message": str(item), "type": "server_error"}})
                return
            generated.append(item)
        body_out = chunk("".join(f" {t}" for t in generated), "length")
        body_out["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(generated),
            "total_tokens": prompt_tokens + len(generated),
        }
        self._json(200, body_out)

    def _body(self) -> dict[str, Any] | None:
        """The request's JSON object (the user-file JSON rules: no NaN, nesting <= 64), or None after a 4xx."""
        length = self.headers.get("Content-Length") or "0"
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            self.close_connection = True  # the body is not read: the connection cannot be reused
            code = 413 if length.isdigit() else 400
            self._error(code, f"Content-Length must be 0-{MAX_BODY_BYTES} bytes, got {length[:40]!r}")
            return None
        try:
            text = (self.rfile.read(int(length)) or b"{}").decode("utf-8")
            body = parse_json(text, "the body", "body")
        except (UnicodeDecodeError, InfercastError) as exc:
            self._error(400, getattr(exc, "message", "the body is not UTF-8"))
            return None
        if not isinstance(body, dict):
            self._error(400, "the body must be a JSON object")
            return None
        return body

    def _event(self, data: dict[str, Any]) -> None:
        self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
        self.wfile.flush()
