"""Where the data lives: an explicit argument, else ``$DISEMBED_DATA_DIR``, else a default.

The defaults, first existing wins: ``../shared/data`` and ``shared/data`` (relative to the
working directory), then the per-user folder that ``disembed data download`` fills when
nothing else is set: ``$XDG_DATA_HOME/disembed/data`` (``~/.local/share/disembed/data``).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..exceptions import ConfigError

ENV_VAR = "DISEMBED_DATA_DIR"
_FALLBACKS = ("../shared/data", "shared/data")


def user_data_dir() -> Path:
    """``$XDG_DATA_HOME/disembed/data``, else ``~/.local/share/disembed/data``."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                           "share")
    return Path(base) / "disembed" / "data"


def default_data_dirs() -> list[Path]:
    """The default locations, in the order they are tried (the per-user folder last)."""
    return [Path(p) for p in _FALLBACKS] + [user_data_dir()]


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """Return the data directory, checking that it exists.

    Order: ``data_dir`` if given, then the environment variable ``DISEMBED_DATA_DIR``,
    then :func:`default_data_dirs`.
    """
    candidates: list[tuple[str, str]] = []
    if data_dir is not None:
        candidates.append((str(data_dir), "the data_dir argument / --data-dir"))
    elif os.environ.get(ENV_VAR):
        candidates.append((os.environ[ENV_VAR], f"${ENV_VAR}"))
    else:
        candidates.extend((str(p), "the default location") for p in default_data_dirs())
    for path, _ in candidates:
        if Path(path).is_dir():
            return Path(path).resolve()
    tried = "; ".join(f"{p} (from {why})" for p, why in candidates)
    raise ConfigError(
        f"No data directory found (tried: {tried}). Run 'disembed data download' to fetch the "
        f"benchmark data, or pass --data-dir DIR / set {ENV_VAR} to the folder holding "
        "tatoeba/, sts17/, wmt20_mlqe/ and parallel/."
    )


def missing_data(what: str, looked_in: str | os.PathLike, data_set: str) -> ConfigError:
    """The error for data that is not where it was looked for: what is missing, the path
    looked in, and the two fixes (download that set, or point at a copy that has it)."""
    return ConfigError(
        f"{what}: not found; looked in {Path(looked_in).resolve()}. Fetch it with "
        f"'disembed data download {data_set}' (add --data-dir DIR to install it elsewhere), or "
        f"pass --data-dir DIR / set ${ENV_VAR} to a folder that already holds it."
    )


def require_file(path: Path, what: str, data_set: str = "") -> Path:
    if not path.is_file():
        raise missing_data(f"{what} (the file {path.name})", path.parent, data_set)
    return path
