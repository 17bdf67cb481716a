"""One generic name -> object registry for encoders, methods and tasks."""

from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterator, TypeVar

from .exceptions import ConfigError, UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps unique names to objects (usually classes or factories).

    >>> methods = Registry("method")
    >>> @methods.register("seed")
    ... class Seed: ...
    >>> methods.get("seed") is Seed
    True
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            self.add(name, obj)
            return obj

        return decorator

    def add(self, name: str, obj: T) -> None:
        if not name or name != name.strip():
            raise ConfigError(f"{self.kind} names must be non-empty without spaces; got {name!r}")
        if name in self._items:
            raise ConfigError(
                f"{self.kind} {name!r} is already registered (by {self._items[name]!r}); "
                "choose another name"
            )
        self._items[name] = obj

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self._items), n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return f"Unknown {self.kind} {name!r}.{hint} Known {self.kind}s: {', '.join(self.names())}."

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
