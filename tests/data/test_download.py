"""``disembed data download`` against a local HTTP server on 127.0.0.1 (never the internet)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from disembed.data import download as download_module
from disembed.data.builders import build
from disembed.data.download import (
    CATALOG_PATH,
    MANIFEST_NAME,
    DownloadFailures,
    data_status,
    download_sets,
    load_catalog,
)
from disembed.data.fetch import DownloadError, download
from disembed.exceptions import ConfigError, DataError


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Files(BaseHTTPRequestHandler):
    """Serves ``server.files`` with Range support; ``server.cut`` paths break their first reply;
    ``server.flaky[path] = n`` answers 503 to the first ``n`` requests for ``path``."""

    def do_GET(self):  # noqa: N802 (http.server API)
        srv = self.server
        srv.log.append((self.path, self.headers.get("Range")))
        if srv.flaky.get(self.path, 0) > 0:
            srv.flaky[self.path] -= 1
            self.send_error(503)
            return
        data = srv.files.get(self.path)
        if data is None:
            self.send_error(404)
            return
        start = 0
        rng = self.headers.get("Range")
        if rng and srv.ranges:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.path in srv.cut:
            srv.cut.discard(self.path)
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)  # the client sees a short read
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Files)
    srv.files, srv.cut, srv.log, srv.ranges, srv.flaky = {}, set(), [], True, {}
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield srv
    srv.shutdown()
    srv.server_close()


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _catalog(srv) -> dict:
    """Two small sets built from fixture files: a copy, an archive member, gzipped columns."""
    readme = b"line one\nline two\n"
    archive = _tar_gz({"pack/a.tsv": b"x\ty\n1\t2\n", "pack/other": b"ignored"})
    en, de = gzip.compress(b"a cat \nthe\tdog\n"), gzip.compress(b"eine Katze\nder Hund\n")
    srv.files.update({"/readme.txt": readme, "/pack.tar.gz": archive, "/en.gz": en,
                      "/de.gz": de, "/bad.txt": b"not what was pinned"})

    def src(name, data):
        return {"url": srv.url + "/" + name, "sha256": sha(data), "size": len(data),
                "pin": "upstream"}

    sources = {"readme.txt": src("readme.txt", readme), "pack.tar.gz": src("pack.tar.gz", archive),
               "en.gz": src("en.gz", en), "de.gz": src("de.gz", de)}
    specs = {"small/README": {"kind": "copy", "source": "readme.txt"},
             "small/a.tsv": {"kind": "member", "source": "pack.tar.gz", "member": "pack/a.tsv"},
             "small/pairs.tsv": {"kind": "columns", "header": ["en", "de"], "columns": [
                 {"source": "en.gz", "gunzip": True}, {"source": "de.gz", "gunzip": True}]}}
    paths = {}
    for sid in sources:  # pin the outputs by building them from the fixtures once
        paths[sid] = Path(srv.tmp) / sid
        paths[sid].write_bytes(srv.files["/" + sid])
    files = {}
    for rel, spec in specs.items():
        data = build(spec, paths)
        files[rel] = {"build": spec, "sha256": sha(data), "size": len(data)}
    bad = {"url": srv.url + "/bad.txt", "sha256": sha(b"the pinned bytes"), "size": 16}
    return {"format_version": 1, "sets": {
        "small": {"folder": "small", "sources": sources, "files": files},
        "corrupt": {"folder": "corrupt", "sources": {"bad.txt": bad}, "files": {
            "corrupt/bad.txt": {"build": {"kind": "copy", "source": "bad.txt"},
                                "sha256": sha(b"the pinned bytes"), "size": 16}}}},
        "manual": {"by-hand": {"folder": "hand", "why": "no public file", "how": "copy it"}}}


@pytest.fixture
def catalog(server, tmp_path):
    server.tmp = tmp_path / "fixtures"
    server.tmp.mkdir()
    return _catalog(server)


def test_download_builds_verifies_and_records(catalog, server, tmp_path):
    root = tmp_path / "data"
    [result] = download_sets(["small"], root, catalog=catalog)
    assert sorted(result.installed) == ["small/README", "small/a.tsv", "small/pairs.tsv"]
    assert (root / "small/a.tsv").read_bytes() == b"x\ty\n1\t2\n"
    pairs = (root / "small/pairs.tsv").read_text()
    assert pairs == "en\tde\na cat\teine Katze\nthe dog\tder Hund\n"
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert manifest["sets"]["small"]["files"]["small/README"] == sha(b"line one\nline two\n")
    assert not (root / ".disembed-downloads").exists()  # sources removed once installed
    assert not list(root.glob(".disembed-tmp-*"))
    requests = len(server.log)
    [again] = download_sets(["small"], root, catalog=catalog)  # resumable: nothing to do
    assert again.installed == [] and again.already_present == 3 and len(server.log) == requests


def test_a_damaged_file_is_rebuilt(catalog, tmp_path):
    root = tmp_path / "data"
    download_sets(["small"], root, catalog=catalog)
    (root / "small/a.tsv").write_text("edited")
    [result] = download_sets(["small"], root, catalog=catalog)
    assert result.installed == ["small/a.tsv"]
    assert (root / "small/a.tsv").read_bytes() == b"x\ty\n1\t2\n"


def test_corrupted_download_is_rejected_and_leaves_nothing(catalog, tmp_path):
    root = tmp_path / "data"
    with pytest.raises(DataError, match="expected .*deleted"):
        download_sets(["corrupt"], root, catalog=catalog)
    left = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    assert left == []  # no .part, no output, no manifest entry


def test_a_corrupted_source_left_by_an_earlier_run_is_fetched_again(catalog, server, tmp_path):
    """A downloaded source kept from an earlier run (--keep-downloads, or a run killed before
    the clean-up) is used only when it still has its pinned hash; a damaged one is fetched
    again, and the files built from it verify."""
    root = tmp_path / "data"
    download_sets(["small"], root, catalog=catalog, keep_downloads=True)
    kept = sorted((root / ".disembed-downloads").iterdir())
    assert kept
    for path in kept:
        path.write_bytes(b"damaged on disk")
    for rel in ("small/README", "small/a.tsv", "small/pairs.tsv"):
        (root / rel).unlink()
    requests = len(server.log)
    [again] = download_sets(["small"], root, catalog=catalog)
    assert sorted(again.installed) == ["small/README", "small/a.tsv", "small/pairs.tsv"]
    assert (root / "small/a.tsv").read_bytes() == b"x\ty\n1\t2\n"
    assert len(server.log) == requests + len(kept)  # each damaged source fetched once more


def test_interrupted_download_resumes_with_a_range_request(server, tmp_path):
    data = bytes(range(256)) * 400
    server.files["/big.bin"] = data
    server.cut.add("/big.bin")
    dest = tmp_path / "big.bin"
    with pytest.raises(DownloadError, match="rerun to resume"):
        download(server.url + "/big.bin", dest, sha(data))
    part = tmp_path / "big.bin.part"
    assert 0 < part.stat().st_size < len(data) and not dest.exists()
    assert download(server.url + "/big.bin", dest, sha(data)) == sha(data)
    assert dest.read_bytes() == data and not part.exists()
    assert server.log[-1] == ("/big.bin", f"bytes={len(data) // 2}-")


def test_server_without_range_support_restarts_the_file(server, tmp_path):
    data = b"0123456789" * 1000
    server.files["/f.bin"], server.ranges = data, False
    (tmp_path / "f.bin.part").write_bytes(b"garbage-prefix")
    assert download(server.url + "/f.bin", tmp_path / "f.bin", sha(data)) == sha(data)
    assert (tmp_path / "f.bin").read_bytes() == data


def test_unpinned_source_is_trusted_on_first_use_and_recorded(catalog, server, tmp_path):
    catalog["sets"]["small"]["sources"]["readme.txt"]["sha256"] = None
    root = tmp_path / "data"
    download_sets(["small"], root, catalog=catalog)
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    url = server.url + "/readme.txt"
    assert manifest["trusted_on_first_use"][url] == sha(b"line one\nline two\n")
    assert manifest["sets"]["small"]["sources"][url]["pin"] == "trust-on-first-use"


def test_offline_error_names_the_file_its_url_and_the_manual_way(catalog, server, tmp_path):
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    with pytest.raises(DownloadError) as err:
        download_sets(["small"], tmp_path / "data", catalog=catalog, timeout=2, backoff=0)
    msg = str(err.value)
    assert f"127.0.0.1:{port}/" in msg and "put it at" in msg and "--data-dir" in msg
    assert ".disembed-downloads" in msg


def test_unknown_and_manual_sets_are_explained(catalog, tmp_path):
    with pytest.raises(ConfigError, match="unknown data set 'nope'.*small"):
        download_sets(["nope"], tmp_path, catalog=catalog)
    with pytest.raises(ConfigError, match="by-hand cannot be downloaded.*copy it"):
        download_sets(["by-hand"], tmp_path, catalog=catalog)


def test_status_reports_missing_partial_ok_and_differing(catalog, tmp_path):
    root = tmp_path / "data"
    _, rows = data_status(root, catalog=catalog)
    assert {r.name: r.state for r in rows}["small"] == "missing"
    download_sets(["small"], root, catalog=catalog)
    (root / "small/README").write_text("changed")
    (root / "small/a.tsv").unlink()
    _, rows = data_status(root, catalog=catalog)
    small = {r.name: r for r in rows}["small"]
    assert (small.present, small.verified) == (2, 1) and small.state.startswith("partial")
    download_sets(["small"], root, catalog=catalog)
    assert {r.name: r.state for r in data_status(root, catalog=catalog)[1]}["small"] == "ok"


def test_packaged_catalog_pins_every_file_and_names_pinned_commits():
    cat = load_catalog(CATALOG_PATH)
    for name in ("tatoeba", "sts17", "wmt20-qe", "bucc2018", "parallel-multi30k"):
        entry = cat["sets"][name]
        for rel, f in entry["files"].items():
            assert len(f["sha256"]) == 64 and f["size"] > 0, rel
        for s in entry["sources"].values():
            assert s["url"].startswith("https://raw.githubusercontent.com/")
            assert len(s["commit"]) == 40 and s["commit"] in s["url"] and len(s["sha256"]) == 64


def test_packaged_catalog_matches_the_shared_data(tmp_path):
    """The pinned outputs of the evaluation sets are byte-identical to the reference data
    (scripts/pin_data_sources.py --compare checks every set)."""
    shared = Path(os.environ.get("DISEMBED_DATA_DIR", "../shared/data"))
    if not (shared / "tatoeba").is_dir():
        pytest.skip("no reference data directory here")
    cat = load_catalog(CATALOG_PATH)
    small = {n: cat["sets"][n] for n in ("tatoeba", "sts17", "wmt20-qe", "wmt21-qe")}
    _, rows = data_status(shared, catalog={"format_version": 1, "sets": small})
    assert {r.name: r.state for r in rows} == dict.fromkeys(small, "ok")


def test_cli_list_and_manual_set_error(tmp_path, capsys):
    from disembed.cli import main

    assert main(["data", "list", "--data-dir", str(tmp_path), "--no-verify"]) == 0
    out = capsys.readouterr().out
    assert "tatoeba" in out and "missing" in out and "parallel-wmt-newstest" in out
    assert main(["data", "download", "parallel-wmt-newstest", "--data-dir", str(tmp_path)]) == 2
    assert "cannot be downloaded automatically" in capsys.readouterr().err


@pytest.fixture
def waits(monkeypatch):
    """The backoff waits, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr(download_module, "_sleep", slept.append)
    return slept


def test_a_flaky_server_is_retried_with_exponential_backoff(catalog, server, tmp_path, waits):
    server.flaky["/readme.txt"] = 2  # two 503s, then the file
    [result] = download_sets(["small"], tmp_path / "data", catalog=catalog, backoff=0.5)
    assert "small/README" in result.installed and not result.error
    assert waits == [0.5, 1.0]
    assert [p for p, _ in server.log].count("/readme.txt") == 3


def test_retries_give_up_after_the_last_attempt_and_a_404_is_not_retried(catalog, server,
                                                                          tmp_path, waits):
    server.flaky["/readme.txt"] = 10
    with pytest.raises(DownloadFailures, match="HTTP 503"):
        download_sets(["small"], tmp_path / "data", catalog=catalog, attempts=3, backoff=1)
    assert waits == [1, 2]
    del server.files["/pack.tar.gz"]
    server.flaky.clear()
    waits.clear()
    with pytest.raises(DownloadFailures, match="HTTP 404"):
        download_sets(["small"], tmp_path / "data2", catalog=catalog, attempts=3)
    assert waits == []  # a missing file does not come back by asking again


def test_a_failed_set_does_not_stop_the_others_and_every_failure_is_reported(
        catalog, server, tmp_path, waits):
    catalog["sets"]["gone"] = {"folder": "gone", "sources": {"x": {
        "url": server.url + "/missing.txt", "sha256": sha(b"x"), "size": 1}}, "files": {
        "gone/x": {"build": {"kind": "copy", "source": "x"}, "sha256": sha(b"x"), "size": 1}}}
    root = tmp_path / "data"
    with pytest.raises(DownloadFailures) as err:
        download_sets(["corrupt", "small", "gone"], root, catalog=catalog)
    by_name = {r.name: r for r in err.value.results}
    assert [r.name for r in err.value.results] == ["corrupt", "small", "gone"]
    assert by_name["small"].installed and not by_name["small"].error  # went on after corrupt
    assert "expected" in by_name["corrupt"].error and "HTTP 404" in by_name["gone"].error
    msg = str(err.value)
    assert msg.startswith("2 of 3 data sets failed (1 installed or already present)")
    assert "  corrupt: " in msg and "  gone: " in msg
    assert (root / "small/a.tsv").is_file() and not (root / "gone").exists()


def test_nothing_is_written_when_every_file_is_present_and_verified(catalog, tmp_path):
    root = tmp_path / "data"
    download_sets(["small"], root, catalog=catalog)
    (root / MANIFEST_NAME).unlink()  # a shared folder someone else filled
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    [result] = download_sets(["small"], root, catalog=catalog)
    assert result.installed == [] and result.already_present == 3
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before  # no manifest either


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_data_folder_that_holds_everything_works(catalog, tmp_path):
    _read_only_case(catalog, tmp_path, lambda: None)


def test_a_read_only_data_folder_that_holds_everything_works_as_root_too(catalog, tmp_path,
                                                                        monkeypatch):
    # root ignores permission bits, so the folder is made unwritable where disembed asks
    _read_only_case(catalog, tmp_path, lambda: monkeypatch.setattr(
        download_module.os, "access", lambda path, mode: False))


def _read_only_case(catalog, tmp_path, make_unwritable):
    root = tmp_path / "data"
    download_sets(["small"], root, catalog=catalog)
    (root / MANIFEST_NAME).unlink()
    for p in [root, *root.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    make_unwritable()
    try:
        [ok] = download_sets(["small"], root, catalog=catalog)
        assert ok.already_present == 3
        with pytest.raises(DownloadFailures, match="corrupt: the data directory .* is not "
                                                   "writable.*--data-dir"):
            download_sets(["corrupt"], root, catalog=catalog)
        assert not (root / MANIFEST_NAME).exists()
    finally:
        for p in [root, *root.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


def test_cli_reports_the_sets_that_worked_and_exits_2_listing_every_failure(
        catalog, tmp_path, monkeypatch, capsys):
    from disembed.cli import main

    real = download_module.load_catalog
    monkeypatch.setattr(download_module, "load_catalog", lambda c=None: real(catalog))
    code = main(["data", "download", "small", "corrupt", "--data-dir", str(tmp_path / "d")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "small: 3 files installed" in out
    assert "1 of 2 data sets failed" in err and "corrupt:" in err
