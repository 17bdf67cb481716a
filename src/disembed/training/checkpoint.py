"""Epoch checkpoints so an interrupted training run resumes where it stopped."""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path
from typing import Any

import torch

from ..util.files import atomic_write_bytes

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.pt"


def save_checkpoint(directory: Path, state: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(Path(directory) / CHECKPOINT_NAME, [buffer.getvalue()])


def load_checkpoint(directory: Path, fingerprint: dict[str, Any]) -> dict[str, Any] | None:
    """The saved state if it belongs to this run (same fingerprint), else ``None``.

    A checkpoint of a different run, or an unreadable one, is moved aside (``.stale``),
    never deleted and never used.
    """
    path = Path(directory) / CHECKPOINT_NAME
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
        same = state.get("fingerprint") == fingerprint
    except Exception as exc:  # noqa: BLE001 - any read failure means "do not use"
        logger.warning("checkpoint %s unreadable (%s); starting afresh", path, exc)
        same, state = False, None
    if not same:
        aside = path.with_suffix(".stale")
        os.replace(path, aside)
        logger.warning("checkpoint %s belongs to another run; moved to %s", path, aside)
        return None
    logger.info("resuming from %s (epoch %d done)", path, state["epoch"])
    return state
