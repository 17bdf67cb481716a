"""How a fitted disentangler is saved and loaded: ``config.json`` + ``model.safetensors``,
both checksummed, written together (a journal) and read strictly.

:class:`Persistent` is the part of :class:`~.base.Disentangler` that saves (the recipe's
learned tensors and entries, and its language identifier's); :func:`read_saved` reads a
folder back, every key, shape and checksum checked, for
:func:`~disembed.methods.load_disentangler`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import CheckpointError, NonFiniteError, NotFittedError
from ..util.files import AtomicFile, commit_together, finish_pending, saving_now
from .config_checks import check_saved
from .language_id import LanguageIdentifier

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
#: config.json key holding the sha256 (hex) of model.safetensors, checked on load
WEIGHTS_CHECKSUM = "weights_sha256"
#: config.json key holding the sha256 (hex) of the rest of config.json (canonical JSON:
#: sorted keys, no spaces), checked on load: an edited method, parameter or learned entry
#: (such as a reordered ``learned.languages``) is refused, not silently used
CONFIG_CHECKSUM = "config_sha256"


def config_digest(config: dict[str, Any]) -> str:
    """sha256 of ``config`` without its :data:`CONFIG_CHECKSUM`, as canonical JSON."""
    body = {k: v for k, v in config.items() if k != CONFIG_CHECKSUM}
    body = json.loads(json.dumps(body, default=str))  # exactly what a reader gets back
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()

#: config.json key (under "learned") and weight-name prefix of the language identifier
LANGUAGE_ID_KEY = "language_id"
_LID_PREFIX = "language_id."


class Persistent:
    """Saving and restoring a fitted disentangler (mixed into :class:`~.base.Disentangler`,
    whose ``name``, ``dim_``, ``is_fitted`` and ``get_params`` it reads)."""

    def _state(self) -> dict[str, np.ndarray]:
        """Learned tensors to save (name -> array)."""
        return {}

    def _extra_config(self) -> dict[str, Any]:
        """Learned non-tensor state to save (JSON-safe)."""
        return {}

    def saved_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(tensors, learned config)`` that :meth:`save` writes: the recipe's
        (:meth:`_state`, :meth:`_extra_config`) and its language identifier's."""
        state = {k: np.ascontiguousarray(v) for k, v in self._state().items()}
        learned = dict(self._extra_config())
        lid = getattr(self, "language_id_", None)
        if lid is not None:
            state.update(lid.state(_LID_PREFIX))
            learned[LANGUAGE_ID_KEY] = lid.config()
        return state, learned

    def restore(self, state: dict[str, np.ndarray], learned: dict[str, Any]) -> None:
        """Rebuild a loaded model's learned state: the recipe's (:meth:`_set_state`) and its
        language identifier's (saved under ``language_id``)."""
        learned = dict(learned)
        lid_config = learned.pop(LANGUAGE_ID_KEY, None)
        state = dict(state)
        lid_state = {k: state.pop(k) for k in list(state) if k.startswith(_LID_PREFIX)}
        self._set_state(state, learned)
        self.language_id_ = (None if lid_config is None else
                             LanguageIdentifier.from_saved(lid_config, lid_state, _LID_PREFIX))

    def _set_state(self, state: dict[str, np.ndarray], extra: dict[str, Any]  # noqa: B027
                   ) -> None:  # methods without learned state keep this no-op
        """Rebuild learned state; must check names and shapes strictly."""

    def save(self, directory: str | Path, metadata: dict[str, Any] | None = None) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``directory`` (atomically);
        ``metadata`` defaults to the model's own (``metadata_``: what it was loaded with, or
        what ``fit_method`` recorded)."""
        from safetensors.numpy import save as save_tensors

        if not self.is_fitted:
            raise NotFittedError(f"cannot save an unfitted {type(self).__name__}")
        directory = Path(directory)
        state, learned = self.saved_state()
        bad = sorted(k for k, v in state.items() if not np.isfinite(v).all())
        if bad:
            raise NonFiniteError(f"refusing to save this {type(self).__name__}: its weights "
                                 f"{bad} hold NaN or infinite values (training diverged; "
                                 "retrain with a lower learning rate, --lr)")
        blob = save_tensors(state)
        config = {
            "format_version": FORMAT_VERSION,
            "method": self.name,
            "params": self.get_params(),
            "dim": int(self.dim_),
            "state": {k: list(v.shape) for k, v in state.items()},
            "learned": learned,
            "metadata": (metadata if metadata is not None
                         else dict(getattr(self, "metadata_", None) or {})),
            WEIGHTS_CHECKSUM: hashlib.sha256(blob).hexdigest(),
        }
        config[CONFIG_CHECKSUM] = config_digest(config)
        # the two files are renamed as one step (a journal, util.files.commit_together):
        # a run killed at any point leaves the old model or the new one, both loadable
        # (calibrate rewrites a model in place), never weights beside another's config
        directory.mkdir(parents=True, exist_ok=True)
        weights = AtomicFile(directory / "model.safetensors", stream=False)
        try:
            cfg = AtomicFile(directory / "config.json", stream=False)
        except BaseException:
            weights.discard()
            raise
        try:
            weights.write(blob)
            cfg.write(json.dumps(config, indent=2, sort_keys=True, default=str).encode())
            commit_together([weights, cfg])
        except BaseException:
            weights.discard()
            cfg.discard()
            raise
        return directory



def _verify_checksum(weights_path: Path, recorded: str | None) -> None:
    """The sha256 of the weights file must match the one ``save`` recorded."""
    if recorded is None:
        logger.warning("%s was saved without a checksum (by an older disembed); loading it "
                       "unverified", weights_path)
        return
    h = hashlib.sha256()
    with open(weights_path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    if h.hexdigest() != recorded:
        raise CheckpointError(
            f"{weights_path} does not match the checksum in config.json (sha256 "
            f"{h.hexdigest()[:16]}..., recorded {str(recorded)[:16]}...): the file is "
            "corrupt or was changed after saving; restore it or train the model again")


def _read_config(cfg_path: Path) -> dict[str, Any]:
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CheckpointError(f"{cfg_path} is not valid JSON: {exc}") from None
    kinds = {"format_version": int, "method": str, "params": dict, "dim": int, "state": dict}
    for key, kind in kinds.items():
        if not isinstance(config, dict) or not isinstance(config.get(key), kind):
            raise CheckpointError(f"{cfg_path} has no valid {key!r} entry (a "
                                  f"{kind.__name__}); expected keys {', '.join(kinds)}")
    if config["format_version"] != FORMAT_VERSION:
        raise CheckpointError(f"{cfg_path}: format_version {config['format_version']}, this "
                              f"disembed reads {FORMAT_VERSION}")
    recorded = config.get(CONFIG_CHECKSUM)
    if recorded is None:
        if WEIGHTS_CHECKSUM in config:
            logger.warning("%s was saved without a checksum of its own content (by an older "
                           "disembed); its method, parameters and learned entries are used "
                           "unverified", cfg_path)
    elif recorded != config_digest(config):
        raise CheckpointError(
            f"{cfg_path} does not match its own checksum ({CONFIG_CHECKSUM}): its method, "
            "parameters or learned entries (e.g. the order of learned.languages) were edited "
            "after saving, which would silently change what the model computes; restore the "
            "file or train the model again")
    return config


def _read_state(weights_path: Path, cfg_path: Path, config: dict[str, Any]
                ) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    _verify_checksum(weights_path, config.get(WEIGHTS_CHECKSUM))
    try:
        state = load_file(str(weights_path))
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{weights_path} could not be read ({exc}); re-save the "
                              "model") from None
    try:
        expected = {k: tuple(v) for k, v in config["state"].items()}
    except TypeError:
        raise CheckpointError(f"{cfg_path}: 'state' must map tensor names to shapes") from None
    got = {k: tuple(v.shape) for k, v in state.items()}
    if expected != got:
        missing = sorted(set(expected) - set(got))
        unexpected = sorted(set(got) - set(expected))
        wrong = sorted(k for k in set(expected) & set(got) if expected[k] != got[k])
        raise CheckpointError(
            f"{weights_path} does not match {cfg_path}: missing keys {missing}, unexpected keys "
            f"{unexpected}, wrong shapes {[(k, expected[k], got[k]) for k in wrong]}")
    bad = sorted(k for k, v in state.items() if not np.isfinite(v).all())
    if bad:
        raise CheckpointError(f"{weights_path}: weights {bad} hold NaN or infinite values; "
                              "the file is corrupt or the training diverged: retrain it")
    return state


def _finish_interrupted_save(directory: Path) -> None:
    """Complete the save of a writer killed between renaming its two files (the journal
    :meth:`Disentangler.save` leaves); a folder this process cannot write is read as is."""
    try:
        finish_pending(directory)
    except OSError as exc:
        logger.warning("%s: an interrupted save could not be completed (%s); rerun as a user "
                       "who can write the folder, or save the model again", directory, exc)


#: how long a load waits for a save in progress in the same folder before it reports
#: what it read (seconds)
SAVE_WAIT_SECONDS = 30.0


def _stamp(directory: Path) -> tuple:
    """What changes when a save renames a file into ``directory``: each file's inode, size
    and modification time."""
    out = []
    for name in ("config.json", "model.safetensors"):
        try:
            st = (directory / name).stat()
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def read_saved(directory: Path) -> tuple[Path, dict[str, Any], dict[str, np.ndarray]]:
    """``(config path, config, weights)`` of a saved disentangler, every key, shape and the
    checksum checked, and the learned config as its constructor and ``fit`` make it
    (:mod:`.config_checks`); :func:`~disembed.methods.load_disentangler` builds the model.

    A read that meets a save in progress (another process renaming the two files in
    place: one is new, the other old, so they disagree) is not called corrupt: it waits
    and reads again, for at most :data:`SAVE_WAIT_SECONDS`, while a live writer's journal
    is there or a file changed under it."""
    deadline = time.monotonic() + SAVE_WAIT_SECONDS
    while True:
        before = _stamp(directory)
        try:
            return _read_saved_once(directory)
        except CheckpointError:
            changed = before != _stamp(directory) or saving_now(directory)
            if not changed or time.monotonic() > deadline:
                raise
            logger.info("%s is being saved by another process; reading it again", directory)
            time.sleep(0.02)


def _read_saved_once(directory: Path) -> tuple[Path, dict[str, Any], dict[str, np.ndarray]]:
    cfg_path, weights_path = directory / "config.json", directory / "model.safetensors"
    _finish_interrupted_save(directory)
    for path in (cfg_path, weights_path):
        if not path.is_file():
            raise CheckpointError(f"{directory} is not a saved disentangler: {path.name} is "
                                  "missing (expected config.json + model.safetensors)")
    config = _read_config(cfg_path)
    state = _read_state(weights_path, cfg_path, config)
    check_saved(cfg_path, config, state)
    return cfg_path, config, state
