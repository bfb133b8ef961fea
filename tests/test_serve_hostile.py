"""Issue 37 item 12: the OpenAI-compatible endpoint under bad requests, deep JSON, bursts and disconnects.
Each bad request gets a 4xx with a message and the server keeps serving; nothing prints a traceback."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import socket
import threading

import pytest

torch = pytest.importorskip("torch")

from infercast.harness.engine.runtime import Engine  # noqa: E402
from infercast.harness.engine.server import EngineServer  # noqa: E402
from infercast.harness.torch_model import TransformerModel  # noqa: E402
from tests.test_engine import SPEC  # noqa: E402


@pytest.fixture(scope="module")
def server():
    torch.set_num_threads(1)
    model = TransformerModel(SPEC, precision="fp32", seed=3)
    engine = Engine(
        model, scheduler="chunked", num_blocks=64, block_size=16, max_num_seqs=16, max_num_batched_tokens=64
    )
    srv = EngineServer(engine, port=0).start()
    yield srv
    srv.stop()


def _post(port: int, body: bytes, timeout: float = 60.0) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


def _ok(port: int) -> None:
    code, doc = _post(port, json.dumps({"prompt": [1, 2, 3], "max_tokens": 2}).encode())
    assert code == 200 and doc["usage"]["completion_tokens"] == 2, doc


@pytest.mark.parametrize(
    "body,param",
    [
        (b'{"prompt": [true], "max_tokens": 2}', "prompt"),
        (b'{"prompt": [false, 1], "max_tokens": 2}', "prompt"),
        (b'{"prompt": [1.0], "max_tokens": 2}', "prompt"),
        (b'{"prompt": [1], "max_tokens": 1e400}', None),
        (b'{"prompt": [1], "max_tokens": NaN}', None),
        (b'{"prompt": [1], "max_tokens": -5}', "max_tokens"),
        (b'{"prompt": [1], "max_tokens": 99999999999999999999}', "max_tokens"),
        (b'{"prompt": "x", "max_tokens": "2"}', "max_tokens"),
        (b"\xff\xfe", None),
        (b"[1, 2]", None),
        (b'{"prompt": ', None),
        (b"[" * 100_000 + b"]" * 100_000, None),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, None),
    ],
)
def test_bad_requests_get_a_4xx_and_the_server_keeps_serving(server, body, param):
    code, doc = _post(server.port, body)
    assert 400 <= code < 500 and doc["error"]["message"], (code, doc)
    if param:
        assert doc["error"]["param"] == param
    assert not server.stopped.is_set() and server.error is None
    _ok(server.port)


def test_bad_content_length_is_refused(server):
    for length in (b"-1", b"abc", str(1 << 40).encode()):
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n")
            head = sock.recv(4096).decode()
        assert head.startswith(("HTTP/1.1 400", "HTTP/1.1 413")), head
    _ok(server.port)


def test_a_burst_of_200_requests_from_50_clients_is_all_answered(server):
    codes: list[int] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        for j in range(4):
            body = json.dumps({"prompt": [k % 90 + 1, j + 1, 7], "max_tokens": 2}).encode()
            try:
                code, _ = _post(server.port, body, timeout=120)
            except OSError as exc:  # refused, reset, timed out: no answer
                code = type(exc).__name__
            with lock:
                codes.append(code)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert len(codes) == 200 and all(c == 200 for c in codes), sorted(map(str, set(codes)))


def test_client_disconnects_print_no_traceback(server):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        for stream in (True, False):
            body = json.dumps({"prompt": [1, 2, 3], "max_tokens": 40, "stream": stream}).encode()
            for _ in range(3):
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
                sock.sendall(
                    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                if stream:
                    sock.recv(64)  # the stream has started
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                sock.close()  # reset: the server's next write fails
        _ok(server.port)
        _ok(server.port)
    assert "Traceback" not in err.getvalue() and "Error" not in err.getvalue(), err.getvalue()
