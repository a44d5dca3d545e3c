# tries: find a descriptor of the broker's: any fd beyond 0-2 left open
#        (but fd 4, the receipt pipe's write end: SECURITY.md, "The
#        receipt"), the worker's fd 3 (its broker socket) through /proc and
#        through pidfd_getfd
# must: fail in both
# receipt: none (readlink and ctypes calls: neither witness sees them)
import builtins
import os
import stat


def receipt_pipe(fd):
    """fd 4, a pipe opened for writing only, and non-blocking."""
    if fd != 4 or not stat.S_ISFIFO(os.fstat(fd).st_mode):
        return False
    with open('/proc/self/fdinfo/4') as f:
        flags = int([l for l in f if l.startswith('flags:')][0].split()[1], 8)
    return flags & os.O_ACCMODE == os.O_WRONLY and flags & os.O_NONBLOCK


mine = sorted(int(x) for x in os.listdir('/proc/self/fd'))
extra = [fd for fd in mine if fd > 2 and os.path.exists('/proc/self/fd/%d' % fd)
         and not os.readlink('/proc/self/fd/%d' % fd).endswith('/fd')
         and not receipt_pipe(fd)]
if extra:
    print('ESCAPED inherited fds', [(fd, os.readlink('/proc/self/fd/%d' % fd)) for fd in extra])
else:
    print('BLOCKED only fds 0-2 and the receipt pipe inherited')
worker = os.getppid()
try:
    target = os.readlink('/proc/%d/fd/3' % worker)
    print('ESCAPED can see the worker\'s fd 3:', target)
except OSError as e:
    print('BLOCKED /proc/<worker>/fd/3:', type(e).__name__, e.errno)
ct = builtins.__dict__['__imp' + 'ort__']('ct' + 'ypes')
libc = ct.CDLL(None, use_errno=True)
libc.syscall.restype = ct.c_long
pidfd = libc.syscall(434, worker, 0)
fd = libc.syscall(438, pidfd, 3, 0)
if fd >= 0:
    print('ESCAPED pidfd_getfd took the worker\'s fd 3 as', fd)
else:
    print('BLOCKED pidfd_getfd errno', ct.get_errno())
