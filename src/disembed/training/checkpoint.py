"""Epoch checkpoints as safetensors + JSON, so an interrupted run resumes where it stopped.

A checkpoint is two files in its directory:

* ``checkpoint-<sha>.safetensors``: every tensor (weights, optimiser moments, ...),
  named by the first 16 hex digits of its sha256;
* ``checkpoint.json``: everything else (JSON-safe), with the tensor file's name and
  full sha256.

Nothing is unpickled: the tensors are read with safetensors, the rest with ``json``.
A save writes the tensor file first (atomically, under a new name), then the JSON
(atomically), then removes older tensor files; a crash at any point leaves the last
complete checkpoint readable. A load checks the JSON, the tensor file's sha256 and
the run's fingerprint; an unreadable or tampered checkpoint is moved aside as
``.corrupt``, one of another run as ``.stale`` (never deleted, never used), and the
run starts afresh. A pickled ``checkpoint.pt`` of an older disembed is moved aside
as ``checkpoint.pt.stale`` unread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from ..exceptions import CheckpointError
from ..util.files import atomic_write_bytes, atomic_write_text
from ..util.jsonsafe import dumps_json

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.json"
LEGACY_NAME = "checkpoint.pt"
FORMAT_VERSION = 1
_TENSOR_FILE = re.compile(r"checkpoint-[0-9a-f]{16}\.safetensors")


@dataclass
class Checkpoint:
    """Tensors (name -> CPU tensor) and JSON-safe metadata of one saved training state."""

    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any]


def save_checkpoint(directory: str | Path, checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` into ``directory`` (see the module docstring for the protocol)."""
    directory = Path(directory)
    tensors = {k: v.detach().contiguous().cpu() for k, v in checkpoint.tensors.items()}
    blob = save_tensors(tensors)
    digest = hashlib.sha256(blob).hexdigest()
    tensor_name = f"checkpoint-{digest[:16]}.safetensors"
    atomic_write_bytes(directory / tensor_name, [blob])
    meta = {**checkpoint.meta, "format_version": FORMAT_VERSION, "tensors": tensor_name,
            "sha256": digest}
    atomic_write_text(directory / CHECKPOINT_NAME, dumps_json(meta))
    for old in directory.glob("checkpoint-*.safetensors"):
        if old.name != tensor_name:
            old.unlink(missing_ok=True)


def load_checkpoint(directory: str | Path, fingerprint: dict[str, Any]) -> Checkpoint | None:
    """The saved checkpoint if it is intact and belongs to this run, else ``None``.

    ``fingerprint`` is compared in its JSON form (tuples read back as lists).
    """
    directory = Path(directory)
    _retire_legacy(directory)
    path = directory / CHECKPOINT_NAME
    if not path.is_file():
        return None
    try:
        checkpoint = _read(directory)
    except (CheckpointError, OSError, ValueError) as exc:
        logger.warning("checkpoint %s is unreadable or corrupt (%s); starting afresh", path, exc)
        move_aside(directory, ".corrupt")
        return None
    if checkpoint.meta.get("fingerprint") != json.loads(dumps_json(fingerprint)):
        aside = move_aside(directory, ".stale")
        logger.warning("checkpoint %s belongs to another run (other data, settings or "
                       "method); moved to %s", path, aside)
        return None
    return checkpoint


def _read(directory: Path) -> Checkpoint:
    meta = json.loads((directory / CHECKPOINT_NAME).read_text(encoding="utf-8"))
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"expected a JSON object with format_version {FORMAT_VERSION}")
    name = meta.get("tensors")
    if not isinstance(name, str) or not _TENSOR_FILE.fullmatch(name):
        raise CheckpointError(f"tensor file name {name!r} is not checkpoint-<16 hex>.safetensors")
    blob = (directory / name).read_bytes()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != meta.get("sha256"):
        raise CheckpointError(f"{name} has sha256 {digest[:16]}..., the JSON expects "
                              f"{str(meta.get('sha256'))[:16]}...")
    try:
        tensors = load_tensors(blob)
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types
        raise CheckpointError(f"{name} is not a readable safetensors file: {exc}") from None
    return Checkpoint(tensors, meta)


def move_aside(directory: str | Path, suffix: str) -> Path:
    """Rename the checkpoint's JSON and tensor file with ``suffix`` (``.stale``/``.corrupt``)."""
    directory = Path(directory)
    path = directory / CHECKPOINT_NAME
    try:
        name = json.loads(path.read_text(encoding="utf-8")).get("tensors")
    except (OSError, ValueError, AttributeError):
        name = None
    if isinstance(name, str) and _TENSOR_FILE.fullmatch(name) and (directory / name).is_file():
        os.replace(directory / name, (directory / name).with_suffix(suffix))
    aside = path.with_suffix(suffix)
    os.replace(path, aside)
    return aside


def _retire_legacy(directory: Path) -> None:
    legacy = directory / LEGACY_NAME
    if legacy.is_file():
        aside = legacy.with_name(LEGACY_NAME + ".stale")
        os.replace(legacy, aside)
        logger.warning("%s is a pickled checkpoint of an older disembed; it is not read "
                       "(no unpickling) and was moved to %s", legacy, aside)


# --- optimiser state as tensors + JSON ----------------------------------------------
def optimizer_to_checkpoint(prefix: str, optimizer: torch.optim.Optimizer
                            ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``optimizer.state_dict()`` as tensors ``<prefix>.<param id>.<name>`` and JSON-safe
    metadata (param groups; any non-tensor per-parameter state)."""
    state_dict = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for pid, slots in state_dict["state"].items():
        for name, value in slots.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{prefix}.{pid}.{name}"] = value
            else:
                scalars.setdefault(str(pid), {})[name] = value
    return tensors, {"param_groups": state_dict["param_groups"], "scalars": scalars}


def optimizer_from_checkpoint(prefix: str, tensors: dict[str, torch.Tensor],
                              meta: dict[str, Any]) -> dict[str, Any]:
    """The ``state_dict`` that :func:`optimizer_to_checkpoint` split (exact round trip)."""
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith(prefix + "."):
            pid, name = key[len(prefix) + 1:].split(".", 1)
            state.setdefault(int(pid), {})[name] = value
    for pid, slots in meta["scalars"].items():
        state.setdefault(int(pid), {}).update(slots)
    groups = [{k: tuple(v) if isinstance(v, list) and k != "params" else v
               for k, v in group.items()} for group in meta["param_groups"]]
    return {"state": state, "param_groups": groups}
