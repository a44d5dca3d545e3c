# tries: change the mode and times of the working directory's files from
#        the run's own scratch, where chmod and utime are allowed: through a
#        symlink left in scratch, `..` out of scratch, /proc/self/cwd,
#        /dev/fd/N and fchmod of a descriptor opened for reading, and a
#        setuid bit on a file of scratch (names built at run time, `posix`
#        for `os`)
# must: fail in unattended
# receipt: none (posix's own functions, which the interpreter's witness
#          does not wrap; the supervisor's refusals are not on the receipt)
# receipt seccomp-only: create (the filter refuses the files it makes in
#          scratch; the worker's write witness records each)
# control: works in approved
import errno
import os
import posix
tmp = os.environ['TMPDIR']
w = '@@WORKDIR@@/victim-'
chmod = getattr(posix, 'ch' + 'mod')
utime = getattr(posix, 'ut' + 'ime')


def attempt(what, fn):
    try:
        fn()
        print('ESCAPED', what)
    except OSError as e:
        print('BLOCKED', what, type(e).__name__, errno.errorcode.get(e.errno, e.errno))


try:  # without Landlock nothing can be made in scratch: the link is absent
    getattr(posix, 'sym' + 'link')(w + 'chmod.txt', tmp + '/link')
except OSError:
    pass
up = tmp + '/..' * tmp.count('/')
fd = posix.open(w + 'touch.txt', posix.O_RDONLY)
attempt('chmod through a symlink in scratch', lambda: chmod(tmp + '/link', 0o777))
attempt('utime through a symlink in scratch', lambda: utime(tmp + '/link', (0, 0)))
attempt('chmod from scratch up', lambda: chmod(up + w + 'chmod.txt', 0o777))
attempt('utime /proc/self/cwd', lambda: utime('/proc/self/cwd/victim-touch.txt', (0, 0)))
attempt('utime /dev/fd/N', lambda: utime('/dev/fd/%d' % fd, (0, 0)))
attempt('fchmod', lambda: getattr(posix, 'fch' + 'mod')(fd, 0o777))
attempt('futimens', lambda: utime(fd, (0, 0)))
# The control must be able to set it too: a file of its own in scratch,
# where the approved profile sets the bit and the unattended one may not.
if os.path.isdir(tmp) and not os.path.exists(tmp + '/s'):
    try:
        posix.close(posix.open(tmp + '/s', posix.O_WRONLY | posix.O_CREAT, 0o755))
    except OSError:
        pass
attempt('setuid bit in scratch', lambda: chmod(tmp + '/s', 0o4755))
