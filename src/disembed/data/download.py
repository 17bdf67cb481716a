"""``disembed data download`` / ``disembed data list``: the benchmark data from its sources.

The catalog (``catalog.json`` beside this module, written by
``scripts/pin_data_sources.py``) lists, per data set, the upstream files ("sources":
raw.githubusercontent.com URLs at pinned commits, each with its SHA-256 and size) and
every file of the data directory built from them, with the SHA-256 of the built file.
Both pins were computed from the git objects at the pinned commits, and every built
file was checked byte-identical to the project's reference copy of the data.

A download, per set:

1. files already present with the pinned hash are kept (nothing to do if all are);
2. the sources the missing files need are fetched into ``<data>/.disembed-downloads``
   (content-addressed, resumable with HTTP ``Range``, verified against their pins; a
   source pinned as ``null`` is trusted on first use and its hash recorded);
3. the missing files are built into a temporary folder inside the data directory and
   each is checked against its pin; only then is each renamed into place;
4. the manifest ``<data>/disembed-data.json`` records what was installed and from where.

A set whose files are all present and verified writes nothing (a shared or read-only data
folder works as it is). A transfer that breaks is retried with exponential backoff; a set
that still fails leaves the data directory as it was (verified sources stay for resuming)
and the other sets go on: :class:`DownloadFailures` then lists every failure at the end.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..exceptions import ConfigError, DataError
from ..util.files import atomic_write_text
from ..util.jsonsafe import dumps_json
from .builders import build, refs_of
from .fetch import DownloadError, download, file_sha256
from .paths import ENV_VAR, default_data_dirs

logger = logging.getLogger(__name__)

CATALOG_PATH = Path(__file__).with_name("catalog.json")
MANIFEST_NAME = "disembed-data.json"
DOWNLOADS = ".disembed-downloads"
#: what ``disembed bench`` and the evaluation tasks read, in download order
DEFAULT_SETS = ("tatoeba", "sts17", "wmt20-qe", "wmt21-qe", "bucc2018", "parallel-multi30k",
                "parallel-flores-v1")


@lru_cache(maxsize=4)
def _read_catalog(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def load_catalog(catalog: str | os.PathLike | Mapping | None = None) -> dict:
    """The catalog: a mapping, a JSON file, or the packaged one."""
    if isinstance(catalog, Mapping):
        return dict(catalog)
    data = _read_catalog(str(catalog or CATALOG_PATH))
    if data.get("format_version") != 1:
        raise ConfigError(f"data catalog {catalog or CATALOG_PATH}: format_version "
                          f"{data.get('format_version')}, this disembed reads 1")
    return data


def set_names(catalog: Mapping | None = None) -> list[str]:
    cat = load_catalog(catalog)
    return list(cat["sets"]) + list(cat.get("manual", {}))


def download_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """Where downloads go: ``data_dir``, else ``$DISEMBED_DATA_DIR``, else the first existing
    default data directory, else the per-user one (``~/.local/share/disembed/data``)."""
    if data_dir is not None:
        return Path(data_dir)
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    defaults = default_data_dirs()
    return next((p for p in defaults if p.is_dir()), defaults[-1])


def _select(names: Sequence[str] | None, cat: Mapping) -> list[str]:
    if not names:
        return [n for n in DEFAULT_SETS if n in cat["sets"]] or list(cat["sets"])
    if list(names) == ["all"]:
        return list(cat["sets"])
    manual = cat.get("manual", {})
    for name in names:
        if name in manual:
            m = manual[name]
            raise ConfigError(f"{name} cannot be downloaded automatically: {m['why']}. "
                              f"Instead: {m['how']} (target folder: {m['folder']}/)")
        if name not in cat["sets"]:
            raise ConfigError(f"unknown data set {name!r}; known: "
                              f"{', '.join([*cat['sets'], *manual])} (or 'all')")
    return list(dict.fromkeys(names))


@dataclass
class SetResult:
    """What one set's download did."""

    name: str
    installed: list[str] = field(default_factory=list)
    already_present: int = 0
    downloaded_bytes: int = 0
    error: str = ""  # why the set could not be installed ("" = it was, or was present)


def _present(root: Path, files: Mapping[str, Mapping]) -> set[str]:
    """Paths of ``files`` that exist under ``root`` with their pinned SHA-256."""
    return {p for p, f in files.items()
            if (root / p).is_file() and (root / p).stat().st_size == f["size"]
            and file_sha256(root / p) == f["sha256"]}


def _source_path(root: Path, sid: str, src: Mapping) -> Path:
    key = (src.get("sha256") or "unpinned")[:16]
    return root / DOWNLOADS / f"{key}-{Path(src.get('path') or sid).name}"


def _fetch_sources(root: Path, name: str, sids: set[str], sources: Mapping,
                   retry: "Retry", tofu: dict) -> tuple[dict[str, Path], int]:
    paths, fetched = {}, 0
    for sid in sorted(sids):
        src = sources[sid]
        path = _source_path(root, sid, src)
        pin = src.get("sha256") or tofu.get(src["url"])
        if path.is_file() and pin and file_sha256(path) == pin:
            paths[sid] = path
            continue
        logger.info("%s: downloading %s (%s bytes)", name, src["url"], src.get("size", "?"))
        try:
            digest = retry.call(download, src["url"], path, pin)
        except DownloadError as exc:
            raise DownloadError(_manual_hint(name, src, path, exc)) from None
        if pin is None:
            tofu[src["url"]] = digest
            logger.warning("%s: %s has no pinned hash; recorded SHA-256 %s (trust on first use)",
                           name, src["url"], digest)
        paths[sid] = path
        fetched += path.stat().st_size
    return paths, fetched


@dataclass(frozen=True)
class Retry:
    """How a transfer that breaks is tried again: ``attempts`` in all, waiting
    ``backoff * 2**k`` seconds before try ``k + 2`` (resuming where the last one stopped)."""

    timeout: float = 60.0
    attempts: int = 4
    backoff: float = 2.0

    def call(self, fetch, url: str, path: Path, pin: str | None) -> str:
        for k in range(self.attempts):
            try:
                return fetch(url, path, pin, timeout=self.timeout)
            except DownloadError as exc:
                if not exc.retryable or k + 1 == self.attempts:
                    raise
                wait = self.backoff * 2 ** k
                logger.warning("%s (try %d of %d); trying again in %.0f s", exc, k + 1,
                               self.attempts, wait)
                _sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover


_sleep = time.sleep  # replaced by tests


class DownloadFailures(DownloadError):
    """Some sets could not be installed; the others were. ``results`` holds one
    :class:`SetResult` per set asked for, ``error`` set on those that failed."""

    def __init__(self, results: list["SetResult"]) -> None:
        failed = [r for r in results if r.error]
        lines = "\n".join(f"  {r.name}: {r.error}" for r in failed)
        done = len(results) - len(failed)
        super().__init__(f"{len(failed)} of {len(results)} data sets failed ({done} installed "
                         f"or already present); rerun the same command to retry them:\n{lines}",
                         retryable=False)
        self.results = results


def _manual_hint(name: str, src: Mapping, path: Path, exc: Exception) -> str:
    pin = f" (SHA-256 {src['sha256']})" if src.get("sha256") else ""
    return (f"{name}: {exc}. The file {src['url']}{pin} is missing. Either download it "
            f"yourself and put it at {path}, then rerun 'disembed data download {name}', or "
            "point --data-dir / $DISEMBED_DATA_DIR at an existing copy of the data")


def _install(root: Path, name: str, todo: list[str], files: Mapping, paths: Mapping) -> None:
    """Build ``todo`` into a temporary folder, verify every file, then move each into place."""
    tmp = Path(tempfile.mkdtemp(prefix=f".disembed-tmp-{name}-", dir=root))
    try:
        for rel in todo:
            data = build(files[rel]["build"], paths)
            digest = hashlib.sha256(data).hexdigest()
            if digest != files[rel]["sha256"]:
                raise DataError(f"{name}: built {rel} has SHA-256 {digest}, expected "
                                f"{files[rel]['sha256']}; nothing was installed")
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        for rel in todo:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / rel, root / rel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def download_sets(names: Sequence[str] | None = None, data_dir: str | os.PathLike | None = None,
                  *, catalog: str | os.PathLike | Mapping | None = None, timeout: float = 60.0,
                  keep_downloads: bool = False, attempts: int = 4,
                  backoff: float = 2.0) -> list[SetResult]:
    """Download, verify and install data sets (default: :data:`DEFAULT_SETS`; ``["all"]``).

    Every set is tried even when an earlier one fails; a broken transfer is tried up to
    ``attempts`` times with exponential ``backoff`` (seconds). Raises
    :class:`DownloadFailures` at the end, listing every set that failed, if any did."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError(f"timeout must be a finite number of seconds > 0; got {timeout!r}")
    cat = load_catalog(catalog)
    root = download_dir(data_dir)
    retry = Retry(timeout, attempts, backoff)
    selected = _select(names, cat)
    manifest = read_manifest(root) if root.is_dir() else {"format_version": 1}
    results = []
    try:
        for name in selected:
            try:
                results.append(_download_set(root, name, cat["sets"][name], manifest, retry,
                                             keep_downloads))
            except (DataError, ConfigError, OSError) as exc:
                logger.error("%s: %s", name, exc)
                results.append(SetResult(name, error=str(exc)))
    finally:
        _remove_empty(root / DOWNLOADS)
    if any(r.error for r in results):
        raise DownloadFailures(results)
    return results


def _writable(root: Path) -> None:
    """Create ``root`` if needed; refuse a folder we cannot write into (only asked when
    something has to be installed)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the data directory {root}: {exc}; pass --data-dir "
                          "with a writable folder") from None
    if not os.access(root, os.W_OK):
        raise ConfigError(f"the data directory {root} is not writable, and files are missing "
                          "there; pass --data-dir with a writable folder (or ask its owner to "
                          "run the download)")


def _download_set(root: Path, name: str, entry: Mapping, manifest: dict, retry: Retry,
                  keep_downloads: bool) -> SetResult:
    """Download, verify and install one set; see the module docstring."""
    files = entry["files"]
    present = _present(root, files) if root.is_dir() else set()
    result = SetResult(name, already_present=len(present))
    todo = [p for p in files if p not in present]
    if not todo:  # everything there and verified: nothing is written
        logger.info("%s: all %d files present and verified", name, len(files))
        return result
    _writable(root)
    tofu = manifest.setdefault("trusted_on_first_use", {})
    sids = set().union(*(refs_of(files[p]["build"]) for p in todo))
    paths, result.downloaded_bytes = _fetch_sources(root, name, sids, entry["sources"], retry,
                                                    tofu)
    _install(root, name, todo, files, paths)
    result.installed = todo
    if not keep_downloads:
        for path in paths.values():
            path.unlink(missing_ok=True)
    manifest.setdefault("sets", {})[name] = _manifest_entry(entry, name)
    _write_manifest(root, manifest)
    logger.info("%s: %d files installed, %d already present", name, len(result.installed),
                result.already_present)
    return result


def _manifest_entry(entry: Mapping, name: str) -> dict:
    return {"installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "reference": entry.get("reference", ""), "licence": entry.get("licence", ""),
            "files": {p: f["sha256"] for p, f in entry["files"].items()},
            "sources": {s["url"]: {"sha256": s.get("sha256"),
                                   "pin": s.get("pin", "upstream") if s.get("sha256")
                                   else "trust-on-first-use"}
                        for s in entry["sources"].values()}}


def _remove_empty(folder: Path) -> None:
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def read_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST_NAME
    if not path.is_file():
        return {"format_version": 1}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DataError(f"{path} is not valid JSON ({exc}); delete it and rerun the "
                        "download (files already present are verified, not fetched again)"
                        ) from None


def _write_manifest(root: Path, manifest: Mapping) -> None:
    atomic_write_text(root / MANIFEST_NAME, dumps_json(manifest) + "\n")


@dataclass
class SetStatus:
    """One row of ``disembed data list``."""

    name: str
    folder: str
    files: int
    present: int
    bytes: int
    verified: int | None  # files with the pinned hash (None: not checked)
    downloadable: bool
    note: str = ""

    @property
    def state(self) -> str:
        if not self.downloadable:
            return "present (manual)" if self.present else "manual: " + self.note
        if self.present == 0:
            return "missing"
        if self.present < self.files:
            return f"partial ({self.files - self.present} missing)"
        if self.verified is None:
            return "present (not verified)"
        return "ok" if self.verified == self.files else f"{self.files - self.verified} differ"


def data_status(data_dir: str | os.PathLike | None = None, *, verify: bool = True,
                catalog: str | os.PathLike | Mapping | None = None) -> tuple[Path, list[SetStatus]]:
    """The data directory and, per set, which of its files are there and whether they verify."""
    cat = load_catalog(catalog)
    root = download_dir(data_dir)
    rows = []
    for name, entry in cat["sets"].items():
        files = entry["files"]
        there = [p for p in files if (root / p).is_file()]
        ok = len(_present(root, {p: files[p] for p in there})) if verify else None
        rows.append(SetStatus(name, entry["folder"], len(files), len(there),
                              sum((root / p).stat().st_size for p in there), ok, True))
    for name, m in cat.get("manual", {}).items():
        folder = root / m["folder"]
        found = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
        rows.append(SetStatus(name, m["folder"], len(found), len(found),
                              sum(p.stat().st_size for p in found), None, False, m["how"]))
    return root, rows
