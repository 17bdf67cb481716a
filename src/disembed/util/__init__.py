"""Leaf utilities shared by every layer: atomic files, one JSON rule, slugs (nothing above)."""

from .files import atomic_write_bytes, atomic_write_text, sha256_file
from .jsonsafe import dumps_json, json_safe
from .text import slug

__all__ = ["atomic_write_bytes", "atomic_write_text", "dumps_json", "json_safe", "sha256_file",
           "slug"]
