"""``disembed data list`` / ``disembed data download [SET ...]``: the data from its sources.

``download`` fetches each set from its original public files (pinned commits, pinned
SHA-256), builds the files the loaders read, verifies them and moves them into the data
directory (``--data-dir``, else ``$DISEMBED_DATA_DIR``, else the first existing default,
else ``~/.local/share/disembed/data``). Files already present and verified are skipped;
an interrupted download resumes. ``list`` shows every set, where it is and whether it
verifies.
"""

from __future__ import annotations

import argparse

from ..data.download import (
    DEFAULT_SETS,
    DownloadFailures,
    data_status,
    download_sets,
    set_names,
)
from .common import add_common, positive_float
from .flags import examples


def add_parser(verbs) -> None:
    p = verbs.add_parser("data", help="download or list the benchmark data", description=__doc__,
                         epilog=examples("disembed data download tatoeba sts17",
                                         "disembed data list"))
    actions = p.add_subparsers(dest="data_action", required=True, metavar="ACTION")
    dl = actions.add_parser("download", help="fetch, verify and install data sets",
                            epilog=examples("disembed data download",
                                            "disembed data download all --keep-downloads"))
    dl.add_argument("sets", nargs="*", metavar="SET",
                    help=f"sets to fetch (default: {', '.join(DEFAULT_SETS)}; 'all' for every "
                         f"downloadable set); known: {', '.join(set_names())}")
    dl.add_argument("--keep-downloads", action="store_true",
                    help="keep the verified upstream files in <data>/.disembed-downloads")
    dl.add_argument("--timeout", type=positive_float, default=60.0,
                    help="network timeout in seconds (a finite number > 0)")
    add_common(dl)
    dl.set_defaults(handler=handle_download)
    ls = actions.add_parser("list", help="show which sets are present, where, and if they verify",
                            epilog=examples("disembed data list --no-verify"))
    ls.add_argument("--no-verify", action="store_true", help="skip the SHA-256 check (faster)")
    add_common(ls)
    ls.set_defaults(handler=handle_list)


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


def handle_download(args: argparse.Namespace) -> int:
    try:
        results = download_sets(args.sets or None, args.data_dir, timeout=args.timeout,
                                keep_downloads=args.keep_downloads)
    except DownloadFailures as failures:
        _print_results([r for r in failures.results if not r.error])
        raise  # every failure, listed, with exit 2
    _print_results(results)
    return 0


def _print_results(results) -> None:
    for r in results:
        print(f"{r.name}: {len(r.installed)} files installed, {r.already_present} already "  # noqa: T201
              f"present, {_size(r.downloaded_bytes)} downloaded")


def handle_list(args: argparse.Namespace) -> int:
    root, rows = data_status(args.data_dir, verify=not args.no_verify)
    print(f"data directory: {root}{'' if root.is_dir() else ' (does not exist)'}")  # noqa: T201
    width = max(len(r.name) for r in rows)
    for r in rows:
        print(f"{r.name:<{width}}  {r.present:>4}/{r.files:<4} {_size(r.bytes):>9}  "  # noqa: T201
              f"{r.folder + '/':<40} {r.state}")
    return 0
