# tries: reach secrets through /proc/self/root, /proc/thread-self/root and
#        /proc/<own pid>/root, the process's view of /
# must: fail in unattended
# control: works in approved
# needs: home (the suite plants the secrets in the snippet user's home)
import errno
import os
MARK = '@@MARK@@'
H = os.environ['HOME']
D = '.'


def attempt(what, read):
    """BLOCKED: the kernel said no (PermissionError); ESCAPED: the planted
    secret came back; FAIL: anything else (gone, empty, another error)."""
    try:
        data = read()
    except PermissionError as e:
        print('BLOCKED', what, errno.errorcode.get(e.errno, e.errno))
        return
    except OSError as e:
        print('FAIL', what, 'not a PermissionError:', repr(e))
        return
    if isinstance(data, bytes):
        data = data.decode(errors='replace')
    print('ESCAPED' if MARK in data else 'FAIL', what, 'read %d bytes' % len(data))


def read_path(p):
    return lambda: open(p, 'rb').read()
key = H + '/' + D + 'ssh/id_' + 'ed25519'
for root in ['/proc/self/root', '/proc/thread-self/root', '/proc/%d/root' % os.getpid()]:
    attempt(root + ' home ssh-dir key', read_path(root + key))
    attempt(root + ' cwd env-file', read_path(root + os.getcwd() + '/' + D + 'en' + 'v'))
