"""Atomic writes and content hashes of files.

Every final output is written through :class:`AtomicFile`: the bytes go to a
temporary file beside the target (``.<name>.tmp-<pid>-<random>``), are flushed and
fsynced, get the permissions a plain ``open(path, "w")`` would give, and the file is
renamed over the target (then the directory is fsynced). Readers see the old file or
the whole new one, never a part. A process killed mid-write leaves only its temporary
file; the next write in that folder removes temporaries whose process is gone.

Several files that belong together (``encode``'s matrix and its sentences) are renamed
with :func:`commit_together`: a small journal lists the finished temporary files before
the first rename, and :func:`finish_pending` (run by every later write in that folder and
by the readers of such pairs) completes the renames of a writer that was killed in
between, so a reader sees the old pair or the new pair, never one of each.

Errors of the operating system (disk full, file too large, permission denied) are
re-raised with ``filename`` set to the target, so a message can name it.

**What an output path may name** (:func:`output_target`, the one place that decides, for
every verb and every writer): a regular file or a new path is replaced atomically as above;
a symbolic link is written *through*: the file it points to is replaced, the link stays;
``-`` is standard output, and a FIFO, a character device (``/dev/null``, a terminal) or a
path under ``/dev`` or ``/proc`` (``/dev/stdout``, ``/proc/self/fd/1``) is written to as a
stream, in place (a stream cannot be replaced atomically: a failed write leaves what was
sent); a block device (a disk), a socket or a directory is refused. The node a path names
is never replaced by a regular file.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable, Literal

from ..exceptions import ConfigError

_TMP_MARK = ".tmp-"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_stale_temps(directory: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Delete the temporary files of atomic writes (of the target ``name``, default every
    target) in ``directory`` whose writing process no longer exists; returns them."""
    removed = []
    pattern = f".{glob.escape(name)}{_TMP_MARK}*" if name else f".*{_TMP_MARK}*"
    for tmp in Path(directory).glob(pattern):
        pid = tmp.name.rsplit(_TMP_MARK, 1)[1].split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            if tmp.is_dir() and not tmp.is_symlink():  # a work folder (export)
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _name_os_error(exc: OSError, path: Path) -> OSError:
    """``exc`` with ``filename`` set to ``path`` when the OS left it out (write errors)."""
    if exc.filename is None:
        exc.filename = str(path)
    return exc


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # not supported here (e.g. some network file systems)
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_JOURNAL_MARK = ".commit-"


def saving_now(directory: str | os.PathLike) -> bool:
    """Whether a live process is between the renames of a :func:`commit_together` in
    ``directory`` (a reader then sees one file new and the other old: wait, read again)."""
    for journal in Path(directory).glob(f".*{_JOURNAL_MARK}*"):
        pid = journal.name.rsplit(_JOURNAL_MARK, 1)[1]
        if pid.isdigit() and _pid_alive(int(pid)):
            return True
    return False


def finish_pending(directory: str | os.PathLike) -> None:
    """Complete the group renames (:func:`commit_together`) of writers in ``directory``
    that died between their first and last rename."""
    for journal in Path(directory).glob(f".*{_JOURNAL_MARK}*"):
        pid = journal.name.rsplit(_JOURNAL_MARK, 1)[1]
        if not pid.isdigit() or _pid_alive(int(pid)):
            continue
        _replay(journal)


def _replay(journal: Path) -> None:
    """Do the renames a journal lists (those already done are skipped), then drop it."""
    try:
        moves = json.loads(journal.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        moves = []  # written atomically, so only a foreign file can be unreadable
    for tmp, target in moves:
        try:
            os.replace(tmp, target)
        except FileNotFoundError:  # renamed before the writer stopped
            pass
    journal.unlink(missing_ok=True)
    _fsync_dir(journal.parent)


def commit_together(files: list["AtomicFile"]) -> None:
    """Rename several prepared :class:`AtomicFile` s of one folder into place as one step
    (see the module docstring)."""
    streams = [f.path for f in files if f.stream]
    if streams:
        raise ConfigError(f"{streams[0]} is not a regular file (standard output, a pipe or a "
                          "device): files that are written together as one step must be "
                          "regular files; give a file path")
    directory = files[0].target.parent
    if any(f.target.parent != directory for f in files):
        raise ConfigError(f"{', '.join(str(f.path) for f in files)} are written together as one "
                          "step, so they must lie in one folder, but a symbolic link among them "
                          "points into another folder; replace the link by the file itself")
    for f in files:
        f.prepare()
    journal = directory / f".{files[0].target.name}{_JOURNAL_MARK}{os.getpid()}"
    atomic_write_bytes(journal, [json.dumps([[str(f.tmp), str(f.target)] for f in files])
                                 .encode("utf-8")])
    try:
        for f in files:
            os.replace(f.tmp, f.target)
    except OSError as exc:
        raise _name_os_error(exc, f.path) from None
    finally:  # also on Ctrl-C between two renames: the journal says what is left to do
        _replay(journal)


Kind = Literal["file", "stream", "stdout"]


@dataclass(frozen=True)
class OutputTarget:
    """What an output path names (module docstring): ``kind`` ``file`` (replaced atomically
    at ``path``, a link's target), ``stream`` (written in place) or ``stdout`` (``-``)."""

    kind: Kind
    path: Path


def _through_proc(path: str) -> bool:
    """Whether ``path`` or a link on the way to its target lies under ``/proc`` (an open file
    descriptor: ``/dev/stdout`` -> ``/proc/self/fd/1``)."""
    current = os.path.abspath(path)
    for _ in range(40):
        if current == "/proc" or current.startswith("/proc/"):
            return True
        if not os.path.islink(current):
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current),
                                                os.readlink(current)))
    return False


def _in_dev(path: str) -> bool:
    """A device path (``/dev/...``, but not the ``/dev/shm`` file system of plain files)."""
    parts = Path(os.path.abspath(path)).parts
    return parts[1:2] == ("dev",) and parts[2:3] != ("shm",)


def _refuse_node(path: str, mode: int) -> None:
    what = ("a block device (a disk)" if stat.S_ISBLK(mode) else "a socket"
            if stat.S_ISSOCK(mode) else "a directory" if stat.S_ISDIR(mode) else None)
    if what:
        raise ConfigError(f"{path} is {what}; expected the path of a file to write (a new "
                          "file, a regular file, a pipe, or - for standard output)")


def output_target(path: str | os.PathLike) -> OutputTarget:
    """Decide how ``path`` is written (see the module docstring); raises
    :class:`~disembed.exceptions.ConfigError` for what is never written."""
    text = os.fspath(path)
    if text == "-":
        return OutputTarget("stdout", Path("-"))
    try:
        mode = os.stat(text).st_mode  # follows links
    except (FileNotFoundError, NotADirectoryError):  # a new file (or a bad parent: the
        mode = None  # writer's own error names it)
    except OSError as exc:
        raise _name_os_error(exc, Path(text)) from None
    if mode is not None:
        _refuse_node(text, mode)
    if _through_proc(text):  # an open file (/dev/stdout): written in place, never replaced
        if mode is None:
            raise ConfigError(f"{text}: no such open file; expected the path of a file to write")
        return OutputTarget("stream", Path(text))
    if mode is None and _in_dev(text):
        raise ConfigError(f"{text}: no such device; expected the path of a file to write")
    if mode is not None and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        return OutputTarget("stream", Path(text))
    if os.path.islink(text) or mode is not None:  # a link (even a dangling one): its target
        return OutputTarget("file", Path(os.path.realpath(text)))
    return OutputTarget("file", Path(text))


def is_standard_output(path: str | os.PathLike | None) -> bool:
    """Whether writing ``path`` writes where standard output goes (``-``, ``/dev/stdout``,
    a file the shell redirected standard output to)."""
    if path is None:
        return False
    if os.fspath(path) == "-":
        return True
    try:
        here, out = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no such path; stdout replaced (tests)
        return False
    return (here.st_dev, here.st_ino) == (out.st_dev, out.st_ino)


class AtomicFile:
    """A temporary file beside ``path`` that replaces it on :meth:`commit`.

    >>> with AtomicFile("out.tsv") as f:      # doctest: +SKIP
    ...     f.write(b"a\\tb\\n")                 # renamed over out.tsv on success

    ``prepare()`` flushes and fsyncs without renaming (to commit several files
    together); ``discard()`` removes the temporary file. On an exception inside the
    ``with`` block the target is left untouched. ``stream=False``: a target that is a
    stream (:func:`output_target`) is refused at once (files committed together).
    """

    def __init__(self, path: str | os.PathLike, *, stream: bool = True) -> None:
        self.path = Path(path)
        where = output_target(path)
        if where.kind != "file" and not stream:  # refused before a pipe is opened (it would
            raise ConfigError(  # wait for a reader, only to be refused at the commit)
                f"{path} is standard output, a pipe or a device, but it is written as one of "
                "several files renamed together as one step (e.g. encode's matrix and its "
                "sentences, a model's config and weights): give a regular file path")
        self.target, self.stream = where.path, where.kind != "file"
        self.tmp: Path | None = None
        self._prepared = False
        if self.stream:
            self.file: IO[bytes] = self._open_stream(where)
            return
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            finish_pending(self.target.parent)  # before its temporaries look stale
            remove_stale_temps(self.target.parent)
            fd, tmp = tempfile.mkstemp(dir=self.target.parent,
                                       prefix=f".{self.target.name}{_TMP_MARK}{os.getpid()}-")
        except OSError as exc:
            raise _name_os_error(exc, self.path) from None
        self.tmp = Path(tmp)
        self.file = os.fdopen(fd, "wb")

    def _open_stream(self, where: OutputTarget) -> IO[bytes]:
        if where.kind == "stdout":
            sys.stdout.flush()
            return sys.stdout.buffer
        try:  # appended: a file behind /dev/stdout keeps what was written to it before
            return open(where.path, "ab")  # noqa: SIM115 - closed by commit / discard
        except OSError as exc:
            raise _name_os_error(exc, self.path) from None

    def write(self, data: bytes) -> None:
        try:
            self.file.write(data)
        except OSError as exc:
            raise _name_os_error(exc, self.path) from None

    def prepare(self) -> None:
        """Flush, fsync and close the temporary file (the target is not touched yet)."""
        if self._prepared:
            return
        if self.stream:
            self._close_stream()
            self._prepared = True
            return
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            mode = (self.target.stat().st_mode & 0o7777 if self.target.exists()
                    else 0o666 & ~_UMASK)
            os.fchmod(self.file.fileno(), mode)
            self.file.close()
        except OSError as exc:
            raise _name_os_error(exc, self.path) from None
        self._prepared = True

    def _close_stream(self) -> None:
        try:
            self.file.flush()
            if self.file is not getattr(sys.stdout, "buffer", None):
                self.file.close()
        except OSError as exc:
            raise _name_os_error(exc, self.path) from None

    def commit(self) -> Path:
        """Rename the finished temporary file over the target (a stream: flush it)."""
        self.prepare()
        if self.stream:
            return self.path
        try:
            os.replace(self.tmp, self.target)
        except OSError as exc:
            raise _name_os_error(exc, self.path) from None
        _fsync_dir(self.target.parent)
        return self.path

    def discard(self) -> None:
        if self.stream:
            try:
                self._close_stream()
            except OSError:
                pass
            return
        try:
            self.file.close()
        except OSError:
            pass
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> "AtomicFile":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()
            return
        try:
            self.commit()
        except BaseException:
            self.discard()
            raise


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); ``False`` where
    the system or the file system cannot."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    return rc == 0


def replace_folder(new: str | os.PathLike, target: str | os.PathLike) -> None:
    """Put the folder ``new`` at ``target``; an existing ``target`` ends at ``new``'s path
    (for the caller to delete). Where the system can, the two are swapped in one step, so a
    kill leaves the old folder or the new one at ``target``, never none; elsewhere the old
    one is moved aside first (a kill in between leaves ``target`` missing, the old folder at
    ``new``'s path)."""
    new, target = Path(new), Path(target)
    try:
        if not target.exists():
            os.replace(new, target)
        elif not _exchange(new, target):
            aside = new.with_name(new.name + ".previous")
            os.replace(target, aside)
            os.replace(new, target)
            os.replace(aside, new)
    except OSError as exc:
        raise _name_os_error(exc, target) from None
    _fsync_dir(target.parent)


def plain_permissions(folder: str | os.PathLike) -> None:
    """Give every file and folder under ``folder`` the permissions a plain ``open`` /
    ``mkdir`` would (``0666`` / ``0777`` less the umask): writers that go through temporary
    files (``mkstemp``, ``mkdtemp``, safetensors) leave ``0600`` / ``0700`` behind, which
    makes one file of a shared folder unreadable to the others who read the rest."""
    for path in [Path(folder), *Path(folder).rglob("*")]:
        if path.is_symlink():
            continue
        mode = 0o777 if path.is_dir() else 0o666
        try:
            os.chmod(path, mode & ~_UMASK)
        except OSError as exc:
            raise _name_os_error(exc, path) from None


def atomic_write_bytes(path: str | os.PathLike, chunks: Iterable[bytes]) -> Path:
    """Write ``chunks`` to ``path`` so readers see either the old file or the whole new one
    (see :class:`AtomicFile`); on any error ``path`` is untouched."""
    with AtomicFile(path) as f:
        for chunk in chunks:
            f.write(chunk)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`atomic_write_bytes` for UTF-8 text."""
    return atomic_write_bytes(path, [text.encode("utf-8")])


def preallocate(path: str | os.PathLike) -> None:
    """Reserve the blocks of ``path`` (its current size) on disk, so that a later
    memory-mapped write cannot fail with SIGBUS on a full disk: the OSError comes now."""
    path = Path(path)
    try:
        with open(path, "r+b") as f:
            size = os.fstat(f.fileno()).st_size
            if size:
                os.posix_fallocate(f.fileno(), 0, size)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return  # the file system cannot reserve blocks: nothing to gain
        raise _name_os_error(exc, path) from None
    except AttributeError:  # no posix_fallocate on this platform
        return


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20, length: int = 16) -> str:
    """sha256 of a file's bytes, the first ``length`` hex characters (streamed, bounded memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()[:length]
