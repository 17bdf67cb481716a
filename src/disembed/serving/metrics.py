"""The service's Prometheus metrics, in the text exposition format (no client library needed).

=========================================  =================================================
``disembed_requests_total``                counter by ``endpoint`` and ``status``
``disembed_request_duration_seconds``      histogram by ``endpoint`` (whole request)
``disembed_request_inputs``                histogram of texts per request
``disembed_batch_texts``                   histogram of distinct texts per encoder call
``disembed_batch_requests``                histogram of requests per encoder call
``disembed_cache_lookups_total``           texts looked up in the embedding cache
``disembed_cache_hits_total``              of those, found there (not encoded)
``disembed_encoder_calls_total``           calls into the encoder
=========================================  =================================================
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import defaultdict
from typing import Callable, Sequence

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Histogram:
    """Cumulative-bucket histogram of one series (Prometheus semantics: ``le`` buckets)."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        sep = "," if labels else ""
        out, running = [], 0
        for bound, n in zip([*map(_num, self.buckets), "+Inf"], self.counts, strict=True):
            running += n
            out.append(f'{name}_bucket{{{labels}{sep}le="{bound}"}} {running}')
        wrap = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{wrap} {_num(self.sum)}", f"{name}_count{wrap} {self.count}"]
        return out


def _num(x: float) -> str:
    return repr(float(x)) if not float(x).is_integer() else str(int(x)) if abs(x) < 1e15 \
        else repr(float(x))


class ServiceMetrics:
    """Thread-safe counters and histograms of one service; :meth:`render` is ``/metrics``."""

    def __init__(self, gauges: Callable[[], dict[str, tuple[str, str, float]]] | None = None
                 ) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.latency: dict[str, Histogram] = {}
        self.inputs = Histogram(SIZE_BUCKETS)
        self.batch_texts = Histogram(SIZE_BUCKETS)
        self.batch_requests = Histogram(SIZE_BUCKETS)
        self._gauges = gauges or dict

    def request(self, endpoint: str, status: int, seconds: float, inputs: int = 0) -> None:
        with self._lock:
            self.requests[(endpoint, int(status))] += 1
            self.latency.setdefault(endpoint, Histogram(LATENCY_BUCKETS)).observe(seconds)
            if inputs:
                self.inputs.observe(inputs)

    def batch(self, requests: int, texts: int) -> None:
        with self._lock:
            self.batch_requests.observe(requests)
            self.batch_texts.observe(texts)

    def render(self) -> str:
        """Every metric in the Prometheus text format (version 0.0.4)."""
        with self._lock:
            out = ["# HELP disembed_requests_total HTTP requests by endpoint and status.",
                   "# TYPE disembed_requests_total counter"]
            out += [f'disembed_requests_total{{endpoint="{e}",status="{s}"}} {n}'
                    for (e, s), n in sorted(self.requests.items())]
            out += ["# HELP disembed_request_duration_seconds Request latency.",
                    "# TYPE disembed_request_duration_seconds histogram"]
            for endpoint, hist in sorted(self.latency.items()):
                out += hist.lines("disembed_request_duration_seconds",
                                  f'endpoint="{endpoint}"')
            for name, hist, what in (
                    ("disembed_request_inputs", self.inputs, "Texts (or pairs) per request."),
                    ("disembed_batch_texts", self.batch_texts,
                     "Distinct texts per encoder call (micro-batch size)."),
                    ("disembed_batch_requests", self.batch_requests,
                     "Requests served by one encoder call.")):
                out += [f"# HELP {name} {what}", f"# TYPE {name} histogram",
                        *hist.lines(name, "")]
        for name, (kind, what, value) in self._gauges().items():
            out += [f"# HELP {name} {what}", f"# TYPE {name} {kind}", f"{name} {_num(value)}"]
        return "\n".join(out) + "\n"
