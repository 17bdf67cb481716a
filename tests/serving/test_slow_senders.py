"""Issue 48.3: a request takes a concurrency slot only once its body has arrived, and a
client's bodies in arrival are bounded, so slow senders never lock other clients out.

Before, 64 sockets that sent half a body held every slot of --max-concurrent-requests for
the whole body timeout, and every other client got 429. The sockets here connect from
127.0.0.2 (all of 127.0.0.0/8 is this machine on Linux) so that the served client,
127.0.0.1, is another address; everything stays on loopback and stops by itself (the body
timeout is 3 s).

Bugs feared: the slot taken before the body (others get 429), a body read that is never
bounded per client, a slot or a read place kept after a 408 or a refusal, a client that
leaves mid-body logging a traceback and counting a 500.
"""

from __future__ import annotations

import logging
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from disembed.encoders import HashEncoder  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.serving.app import BackgroundServer, ServeOptions, create_app  # noqa: E402
from disembed.serving.requests import Limits  # noqa: E402
from disembed.serving.service import EmbeddingService  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="connects from 127.0.0.2 (Linux's whole 127/8)")

SLOW = "127.0.0.2"
HALF = (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 40\r\n\r\n{\"input\": \"half a bo")
TIMEOUT = 3.0


@pytest.fixture
def served():
    service = EmbeddingService(HashEncoder(16), make_method("baseline"), label="m")
    app = create_app(service, limits=Limits(body_timeout=TIMEOUT, max_client_body_reads=16),
                     options=ServeOptions(max_concurrent_requests=4))
    with BackgroundServer(app) as url:
        yield url, app


def _half_senders(url: str, n: int) -> list[socket.socket]:
    host, port = url.removeprefix("http://").split(":")
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, int(port)), timeout=TIMEOUT + 10,
                                     source_address=(SLOW, 0))
        s.sendall(HALF)
        socks.append(s)
    return socks


def _arriving(client, url: str) -> tuple[int, int]:
    """``(bodies arriving, bodies refused)`` from /info, once the server has seen all 64."""
    deadline = time.monotonic() + 10
    while True:
        got = client.get(url + "/info").json()["admission"]
        seen = got["bodies_arriving"], got["bodies_refused"]
        if sum(seen) >= 64 or time.monotonic() > deadline:
            return seen
        time.sleep(0.05)


def _answer(s: socket.socket) -> str:
    data = b""
    try:
        while b"}}" not in data and (chunk := s.recv(4096)):
            data += chunk
    except OSError:
        pass
    s.close()
    return data.decode("latin-1")


def test_half_sent_bodies_leave_other_clients_served(served):
    url, app = served
    socks = _half_senders(url, 64)
    with httpx.Client(timeout=10) as client:  # from 127.0.0.1
        assert _arriving(client, url) == (16, 48)  # 16 reads held, the rest refused at once
        assert app.state.admission.active == 0  # still arriving: no slot taken
        codes = [client.post(url + "/v1/embeddings", json={"input": f"text {i}"}).status_code
                 for i in range(8)]
        assert codes == [200] * 8
        assert _arriving(client, url) == (16, 48)  # served while the 16 were still held
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(_answer, socks))
    statuses = [a.split(" ", 2)[1] for a in answers]
    # 16 reads in arrival per client: the rest refused at once, the 16 timed out
    assert statuses.count("429") == 48 and statuses.count("408") == 16, statuses
    assert "Limits.max_client_body_reads" in next(a for a in answers if " 429 " in a)
    assert app.state.admission.active == 0 and app.state.admission.rejected == 0
    assert "did not arrive within 3 s" in next(a for a in answers if " 408 " in a)
    assert app.state.body_reads.reading == {}  # every place back after the 408s


def test_a_client_at_its_read_limit_is_refused_with_retry_after(served):
    url, _ = served
    socks = _half_senders(url, 16)
    with httpx.Client(timeout=10) as client:  # from 127.0.0.1
        deadline = time.monotonic() + 10
        while client.get(url + "/info").json()["admission"]["bodies_arriving"] < 16:
            assert time.monotonic() < deadline, "the 16 half bodies never arrived"
            time.sleep(0.05)
    with httpx.Client(timeout=10, transport=httpx.HTTPTransport(local_address=SLOW)) as c:
        got = c.post(url + "/v1/embeddings", json={"input": "x"})
    assert got.status_code == 429 and got.headers["retry-after"] == "1"
    assert "16 request bodies arriving" in got.json()["error"]["message"]
    for s in socks:
        s.close()
    deadline = time.monotonic() + 5  # the server sees them leave; their places come back
    while time.monotonic() < deadline:
        with httpx.Client(timeout=10, transport=httpx.HTTPTransport(local_address=SLOW)) as c:
            if c.post(url + "/v1/embeddings", json={"input": "x"}).status_code == 200:
                return
        time.sleep(0.1)
    pytest.fail("the read places of closed connections never came back")


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def test_a_client_leaving_mid_body_logs_no_traceback_and_counts_no_500(served):
    url, _ = served
    records = _Records()
    loggers = [logging.getLogger(n) for n in ("", "uvicorn", "uvicorn.error", "disembed")]
    for lg in loggers:
        lg.addHandler(records)
    try:
        for s in _half_senders(url, 3):
            s.close()
        deadline, metrics = time.monotonic() + 5, ""
        while 'status="499"} 3' not in metrics and time.monotonic() < deadline:
            time.sleep(0.05)
            metrics = httpx.get(url + "/metrics", timeout=10).text
    finally:
        for lg in loggers:
            lg.removeHandler(records)
    assert 'disembed_requests_total{endpoint="/v1/embeddings",status="499"} 3' in metrics
    assert 'status="500"' not in metrics
    assert not [r for r in records.records if r.exc_info or r.levelno >= logging.ERROR]
