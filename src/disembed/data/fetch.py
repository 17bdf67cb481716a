"""Download one file over HTTP(S) with resume and a SHA-256 check (stdlib only).

Bytes go to ``<dest>.part``; an interrupted transfer leaves the ``.part`` file, and
the next call asks the server for the rest (``Range: bytes=N-``). A server that ignores
the range (``200`` instead of ``206``) gets a fresh download. Only a file whose SHA-256
matches the pin is renamed to ``dest``; a mismatch deletes the ``.part`` file, so
nothing unverified is left behind.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import urllib.error
import urllib.request
from pathlib import Path

from ..exceptions import DataError

logger = logging.getLogger(__name__)

CHUNK = 1 << 20
USER_AGENT = "disembed-data-download (+https://pypi.org/project/disembed/)"


class DownloadError(DataError):
    """A file could not be fetched (network, HTTP status, interrupted transfer).

    ``retryable`` is False where asking again cannot help (an HTTP 4xx other than 408 and
    429: the file is not there, or not for us)."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


def file_sha256(path: str | os.PathLike, chunk: int = CHUNK) -> str:
    """Full hex SHA-256 of a file (streamed)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _open(url: str, start: int, timeout: float):
    headers = {"User-Agent": USER_AGENT}
    if start:
        headers["Range"] = f"bytes={start}-"
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def _append_or_restart(resp, start: int) -> int:
    """Offset the response body starts at: ``start`` for a matching 206, else 0."""
    if start and resp.status == 206:
        content_range = resp.headers.get("Content-Range", "")
        if content_range.startswith(f"bytes {start}-"):
            return start
    return 0


def download(url: str, dest: str | os.PathLike, sha256: str | None, *,
             timeout: float = 60.0) -> str:
    """Fetch ``url`` to ``dest``, resuming a ``.part`` file; returns the file's SHA-256.

    ``sha256=None`` accepts any content (trust on first use: the caller records the
    returned hash). Raises :class:`DownloadError` when the server cannot be reached or
    the transfer breaks (the ``.part`` file is kept for resuming), and :class:`DataError`
    when the bytes do not match ``sha256`` (the ``.part`` file is deleted).
    """
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    start = part.stat().st_size if part.exists() else 0
    try:
        _transfer(url, part, start, timeout)
    except urllib.error.HTTPError as exc:
        if exc.code != 416 or not start:  # 416: the .part file already holds every byte
            raise DownloadError(f"HTTP {exc.code} {exc.reason} for {url}",
                                retryable=exc.code >= 500 or exc.code in (408, 429)) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        have = part.stat().st_size if part.exists() else 0
        reason = getattr(exc, "reason", None) or exc
        kept = f" ({have} bytes kept in {part}; rerun to resume)" if have else ""
        raise DownloadError(f"could not download {url}: {reason}{kept}") from None
    digest = file_sha256(part)
    if sha256 is not None and digest != sha256:
        size = part.stat().st_size
        part.unlink()
        raise DataError(f"{url}: downloaded {size} bytes with SHA-256 {digest}, expected "
                        f"{sha256}; the file was deleted. The server sent other bytes than "
                        "the pinned ones (a changed or corrupted file); retry, or report it")
    os.replace(part, dest)
    return digest


def _transfer(url: str, part: Path, start: int, timeout: float) -> None:
    with _open(url, start, timeout) as resp:
        offset = _append_or_restart(resp, start)
        if start and not offset:
            logger.info("%s: server ignored the range request, downloading from the start", url)
        expected = resp.headers.get("Content-Length")
        got = 0
        with open(part, "ab" if offset else "wb") as f:
            while block := resp.read(CHUNK):
                f.write(block)
                got += len(block)
        if expected is not None and got != int(expected):
            raise http.client.IncompleteRead(b"", int(expected) - got)
