"""The project's error types.

Every message says what was wrong, what was expected, what was received and how
to fix it. User input is validated with these, never with ``assert``.
"""

from __future__ import annotations

import importlib


class DisembedError(Exception):
    """Base class of every error raised on purpose by disembed."""


class ConfigError(DisembedError, ValueError):
    """A setting or argument has a value outside its allowed range or set."""


class UnknownNameError(ConfigError, KeyError):
    """A registry lookup used a name that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DataError(DisembedError, ValueError):
    """Input data is malformed: empty sentences, ragged rows, bad bytes, misaligned files."""


class NotFittedError(DisembedError, RuntimeError):
    """A fitted-state method was called on an object that has not been fitted."""


class ShapeError(DisembedError, ValueError):
    """An array has the wrong number of features or rows."""


class CheckpointError(DisembedError, RuntimeError):
    """A saved model or checkpoint is missing keys, has wrong shapes or is corrupt."""


class NonFiniteError(DisembedError, ValueError):
    """Numbers that must be finite are NaN or infinite: an encoder's output, a training
    loss, model weights. Such values are never cached or saved."""


class MissingDependencyError(DisembedError, ImportError):
    """An optional dependency is not installed; the message names the pip extra."""


def require(module: str, extra: str, purpose: str):
    """Import ``module`` or raise with the exact install command for ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{purpose} needs the Python package '{module}', which is not installed. "
            f'Install it with: pip install "disembed[{extra}]"'
        ) from exc
