# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one safe writer: read, diff (secrets masked), check the directory is writable, back up,
write a temp file in the target's directory, keep owner and mode, move it atomically."""

from __future__ import annotations

import os
import shutil
import tempfile
import time

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import mask_text


class FileError(Exception):
    """A file that exists but cannot be read as text; the message names it and the fix."""


def read_text(path: str, what: str = "file") -> str | None:
    """The file's text, or None when it does not exist. Anything else that stops it being read
    (a directory, a path under a regular file, text that is not UTF-8, no permission) is a
    FileError naming WHAT and the path."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise FileError("the %s %s is a directory, not a file: move it away or give another path" % (what, path))
    except NotADirectoryError:
        raise FileError("the %s %s cannot exist: a part of its path is a file, not a directory; "
                        "move that file away or give another path" % (what, path))
    except UnicodeDecodeError as exc:
        raise FileError("the %s %s is not UTF-8 text (%s): it was not written by this collection or its "
                        "program; move it away" % (what, path, exc.reason))
    except OSError as exc:
        raise FileError("cannot read the %s %s: %s" % (what, path, exc.strerror or exc))


def diff_entry(path: str, before: str | None, after: str | None) -> dict:
    """One file's diff for Ansible's diff output, credentials masked."""
    return {"before_header": path if before is not None else "%s (absent)" % path,
            "after_header": path if after is not None else "%s (absent)" % path,
            "before": mask_text(before) or "", "after": mask_text(after) or ""}


def write_record(module, result: dict, path: str, what: str, before: str | None, after: str) -> None:
    """A node-local record (JSON text) written atomically as after: refused with a message naming
    `what` when it cannot be written; result gains changed and, with --diff, the diff; nothing is
    written in check mode."""
    problem = check_writable(path)
    if problem:
        module.fail_json(msg="cannot write the %s %s: %s" % (what, path, problem))
    result["changed"] = True
    if not module.check_mode:
        write_atomic(module, path, after, mode=0o644)
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = diff_entry(path, before, after)


def with_env(text: str | None, settings: dict) -> str:
    """An environment file (systemd's EnvironmentFile, KEY=value lines) with ``settings`` set:
    a line that sets a key is replaced in place, missing keys are appended, every other line is
    kept as it is."""
    lines = (text or "").splitlines()
    done = set()
    for index, line in enumerate(lines):
        key = line.split("=", 1)[0].strip()
        if "=" in line and not line.lstrip().startswith("#") and key in settings:
            lines[index] = "%s=%s" % (key, settings[key]) if key not in done else None
            done.add(key)
    lines = [line for line in lines if line is not None]
    lines += ["%s=%s" % (key, value) for key, value in settings.items() if key not in done]
    return "\n".join(lines) + "\n" if lines else ""


def root_problem(host_root: str) -> str | None:
    """Why host_root cannot be the node's root the modules read under (a mistyped path read as an
    empty node would say that no driver is installed), or None."""
    if os.path.isdir(host_root):
        return None
    what = "is not a directory" if os.path.exists(host_root) else "does not exist"
    return ("host_root %s %s: give the directory where the node's / is mounted (for example /host), or / on the "
            "node itself; nothing was read or changed" % (host_root, what))


def require_root(module, option: str = "host_root") -> None:
    """Fails the module, before anything is read, when its host_root option is no directory."""
    problem = root_problem(module.params[option])
    if problem:
        module.fail_json(msg=problem)


def check_writable(path: str) -> str | None:
    """Why path cannot be written (or its nearest existing directory), or None when it can."""
    directory = os.path.dirname(path) or "."
    while not os.path.isdir(directory):
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    if not os.access(directory, os.W_OK | os.X_OK):
        return "directory %s is not writable" % directory
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "%s is not writable" % path
    return None


def backup(module, path: str, directory: str | None = None) -> str | None:
    """A copy of path (when it exists) next to it, as Ansible's backups are, or in directory -
    for files in a directory the service reads whole (CRI-O reads every file in crio.conf.d,
    a backup included). Returns the backup's path."""
    if not os.path.exists(path):
        return None
    if directory is None:
        return module.backup_local(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    target = os.path.join(directory, "%s.%d.%s~" % (os.path.basename(path), os.getpid(),
                                                    time.strftime("%Y-%m-%d@%H:%M:%S")))
    shutil.copy2(path, target)
    return target


def write_atomic(module, path: str, text: str | bytes, backup_dir: str | None = None, mode: int | None = None,
                 like: str | None = None, keep_backup: bool = False) -> str | None:
    """Write text (or bytes) to path through a temp file in the same directory and an atomic move.
    Owner and mode: the existing file's, else those of `like` (another file), else mode/0644.
    With keep_backup, the file is backed up first (see backup()). Returns the backup's path."""
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        os.makedirs(directory, mode=0o755)
    backup_file = backup(module, path, backup_dir) if keep_backup else None
    reference = path if os.path.exists(path) else like if like and os.path.exists(like) else None
    if reference:
        stat = os.stat(reference)
        perms, owner = stat.st_mode & 0o7777, (stat.st_uid, stat.st_gid)
    else:
        perms, owner = (mode if mode is not None else 0o644), None
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory or ".")
    try:
        # bytes as they are (a binary keyring), text as UTF-8
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else os.fdopen(fd, "w", encoding="utf-8")) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, perms)
        if owner:
            os.chown(tmp, *owner)
        module.atomic_move(tmp, path, unsafe_writes=False)
        # atomic_move gives a new file the default permissions: set the intended ones
        os.chmod(path, perms)
        if owner:
            os.chown(path, *owner)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return backup_file


def remove(module, path: str, keep_backup: bool = False, backup_dir: str | None = None) -> str | None:
    """Remove path (backed up first with keep_backup). Returns the backup's path."""
    backup_file = backup(module, path, backup_dir) if keep_backup else None
    if os.path.exists(path):
        os.unlink(path)
    return backup_file
