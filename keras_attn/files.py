"""Writing files whole: every file keras_attn writes appears at its path
complete, or not at all. A write goes to a temporary name beside its
target (`.tmp-<random>-<name>`), is flushed, and is renamed over the
target (`os.replace`); a failure before the rename removes it and leaves
any previous file as it was."""

import contextlib
import os
import secrets
import shutil
import stat


@contextlib.contextmanager
def atomic_write(path):
    """Yields a temporary path beside `path` for the body to write; when the
    body returns, the file is flushed to disk and renamed to `path`.

    The temporary name ends with `path`'s name (so `.keras`, `.weights.h5`
    and `.npz` writers accept it); the file gets the permissions `open(path,
    "w")` would give; a symbolic link at `path` is followed.

        with atomic_write("adapters.npz") as temporary:
            np.savez(temporary, kernel=np.zeros(3))

    Args:
        path: the file to write (a string or path-like).

    Raises:
        OSError: the temporary file cannot be created beside `path` or
            renamed over it; whatever the body raises, after the temporary
            file is removed.
    """
    target = os.path.realpath(os.fspath(path))
    folder, name = os.path.split(target)
    temporary = _new_name(folder, ".tmp", name)
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temporary, stat.S_IMODE(os.stat(target).st_mode))
        yield temporary
        _sync(temporary)
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
    _sync(folder)


@contextlib.contextmanager
def atomic_directory(path, leave_out=()):
    """Yields a new, empty temporary folder beside `path` for the body to fill;
    when the body returns, that folder becomes `path`, so `path` holds either
    its previous contents or its new ones, never a mix (it is briefly absent
    between two renames).

    Entries of a previous `path` the body did not write are carried over
    (hard links where possible, else copies), except `leave_out`. A failure
    anywhere leaves `path` as it was and removes the temporary folders.

    Args:
        path: the folder to write; its parent must exist.
        leave_out: names of entries of a previous `path` not to carry over.

    Raises:
        NotADirectoryError: `path` exists and is not a folder.
        OSError: a folder cannot be created or renamed beside `path` (if the
            previous folder cannot be renamed back, the message says where it
            is); whatever the body raises, after cleaning up.
    """
    target = os.path.realpath(os.fspath(path))
    if os.path.exists(target) and not os.path.isdir(target):
        raise NotADirectoryError(f"{os.fspath(path)!r} is a file, not a folder.")
    parent, name = os.path.split(target)
    staging = _new_name(parent, ".tmp", name)
    os.mkdir(staging, 0o777)
    try:
        yield staging
        for entry in os.listdir(staging):
            _sync(os.path.join(staging, entry))
        if not os.path.isdir(target):
            os.rename(staging, target)
        else:
            _carry_over(target, staging, set(os.listdir(staging)) | set(leave_out))
            _swap(target, staging, _new_name(parent, ".old", name))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _sync(parent)


def _swap(target, staging, previous):
    """Renames the folder `target` to `previous` and `staging` to `target`,
    renaming `previous` back where the second rename fails."""
    os.rename(target, previous)
    try:
        os.rename(staging, target)
    except BaseException as error:
        try:
            os.rename(previous, target)
        except OSError as restore_error:
            raise OSError(
                f"Could not replace the folder {target!r} ({error}) nor put its previous "
                f"contents back ({restore_error}): they are in {previous!r}."
            ) from error
        raise
    shutil.rmtree(previous, ignore_errors=True)


def _carry_over(source, destination, skipped):
    """Links (else copies) every entry of `source` not in `skipped` into
    `destination`, symbolic links as links."""
    for entry in os.listdir(source):
        if entry in skipped:
            continue
        origin, copy = os.path.join(source, entry), os.path.join(destination, entry)
        if os.path.islink(origin):
            os.symlink(os.readlink(origin), copy)
        elif os.path.isdir(origin):
            shutil.copytree(origin, copy, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(origin, copy)


def _link_or_copy(origin, copy):
    try:
        os.link(origin, copy)
    except OSError:
        shutil.copy2(origin, copy)


def _new_name(folder, kind, name):
    """An unused path in `folder`: `{kind}-{random}-{name}`."""
    while True:
        candidate = os.path.join(folder, f"{kind}-{secrets.token_hex(4)}-{name}")
        if not os.path.lexists(candidate):
            return candidate


def _sync(path):
    """Flushes the file or folder `path` to disk, where the system can (not
    every file system or platform syncs a folder)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
