# SPDX-License-Identifier: MIT
# Run by the snippet's main program (PYTHON_SNIPPET_MAIN in proto/proto.h)
# before the snippet, in the snippet's own process, with `fd` the write
# end of the worker's receipt pipe (worker/receipt.c).  It wraps the few
# calls whose refusal a person wants named (open, create, remove, rename,
# signal, sockets) and reports each that raised PermissionError as one
# line "kind<TAB>target".  A report, never a boundary: the snippet can
# undo the wrappers, write lines of its own, or close the fd, and the
# worker believes a line only as far as SECURITY.md says.  The wrappers
# re-raise what they caught, unchanged; their frame is left out of an
# uncaught exception's traceback.
import builtins
import io
import os
import sys

_sent = 0


def _note(kind, target):
    global _sent
    if target and _sent < 4096:
        _sent += 1
        line = "%s\t%s\n" % (kind, target[:300].replace("\n", " "))
        try:
            os.write(fd, line.encode("utf-8", "backslashreplace"))  # noqa: F821
        except Exception:
            pass


def _at(path, dir_fd=None):
    """The file as this process named it, at the moment of the call: from
    dir_fd's directory when given, and through /proc/self, /proc/<pid> and
    the fds under them resolved here, since the worker judges the line
    after this process is gone."""
    if isinstance(path, int):
        return None
    p = os.fsdecode(path)
    if dir_fd is not None and not p.startswith("/"):
        try:
            p = os.path.join(os.readlink("/proc/self/fd/%d" % dir_fd), p)
        except (OSError, TypeError, ValueError):
            return None
    if not p.startswith("/"):
        p = os.path.join(os.getcwd(), p)
    p = "/" + p.lstrip("/")
    # Through /proc, `..` is the kernel's to resolve, not the text's.
    if p.startswith("/proc/"):
        try:
            return os.path.realpath(p)
        except (OSError, ValueError):
            pass
    return os.path.normpath(p)


def _addr(a):
    return "%s:%s" % a[:2] if isinstance(a, tuple) else os.fsdecode(a).replace("\0", "@")


def _wrap(module, name, what):
    f = getattr(module, name)

    def w(*a, **kw):
        try:
            return f(*a, **kw)
        except PermissionError:
            try:
                _note(*what(*a, **kw))
            except Exception:
                pass
            raise

    w.__name__, w.__qualname__, w.__doc__ = f.__name__, f.__qualname__, f.__doc__
    # What os says a function supports holds for its wrapper too: shutil
    # picks its symlink-safe rmtree by `os.open in os.supports_dir_fd`.
    if module is os:
        for supports in (os.supports_dir_fd, os.supports_fd, os.supports_follow_symlinks,
                         os.supports_effective_ids):
            if f in supports:
                supports.add(w)
    setattr(module, name, w)
    return w


_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC
builtins.open = _wrap(io, "open", lambda f, m="r", *a, **kw: (
    "write" if set(m) & set("wax+") else "read", _at(f)))
_wrap(os, "open", lambda p, fl, *a, dir_fd=None, **kw: (
    "write" if fl & _WRITE else "read", _at(p, dir_fd)))
# Each: the function, what it does, which argument names the file, and
# the keyword of the directory fd that argument is relative to.
for _f, _kind, _i, _fd in (("remove", "delete", 0, "dir_fd"), ("unlink", "delete", 0, "dir_fd"),
                           ("rmdir", "delete", 0, "dir_fd"), ("rename", "rename", 0, "src_dir_fd"),
                           ("replace", "rename", 0, "src_dir_fd"), ("mkdir", "create", 0, "dir_fd"),
                           ("symlink", "create", 1, "dir_fd"), ("link", "create", 1, "dst_dir_fd"),
                           ("truncate", "write", 0, None)):
    _wrap(os, _f, lambda *a, kind=_kind, i=_i, fd=_fd, **kw: (kind, _at(a[i], kw.get(fd))))
_CODE = _wrap(os, "kill", lambda pid, sig: ("signal", str(int(pid)))).__code__


def _sockets(S):
    _wrap(S, "__init__", lambda s, family=-1, *a, **kw: (
        ("connect-unix", "AF_UNIX socket") if family == 1 else ("syscall", "socket")))
    _wrap(S, "bind", lambda s, a: ("bind", _addr(a)))
    _wrap(S, "listen", lambda s, *a: ("listen", _addr(s.getsockname())))


class _SocketFinder:
    """Wraps `socket` when the snippet imports it: importing it here would
    cost every snippet the time, and most never use it."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "socket":
            return None
        sys.meta_path.remove(_SocketFinder)
        spec = sys.modules["_frozen_importlib_external"].PathFinder.find_spec(name, path)
        exec_module = getattr(getattr(spec, "loader", None), "exec_module", None)
        if exec_module:
            def load(m):
                exec_module(m)
                _sockets(m.socket)
            spec.loader.exec_module = load
        return spec


if "socket" in sys.modules:
    _sockets(sys.modules["socket"].socket)
else:
    sys.meta_path.insert(0, _SocketFinder)


def _hook(t, v, tb, hook=sys.excepthook):
    kept = []
    while tb is not None:
        if tb.tb_frame.f_code is not _CODE:
            kept.append(tb)
        tb = tb.tb_next
    for i, x in enumerate(kept):
        x.tb_next = kept[i + 1] if i + 1 < len(kept) else None
    tb = kept[0] if kept else None
    hook(t, v.with_traceback(tb), tb)


sys.excepthook = _hook
