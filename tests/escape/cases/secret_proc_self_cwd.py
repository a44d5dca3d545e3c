# tries: reach the working directory's .env and the home's secrets through
#        /proc/self/cwd and /proc/self/fd/<directory fd>
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
attempt('/proc/self/cwd/env-file', read_path('/proc/self/cwd/' + D + 'en' + 'v'))
attempt('/proc/self/cwd/../env-file', read_path('/proc/self/cwd/../' + D + 'en' + 'v'))
fd = os.open(H, os.O_RDONLY | os.O_DIRECTORY)
attempt('/proc/self/fd/HOME/netrc-file', read_path('/proc/self/fd/%d/%s' % (fd, D + 'net' + 'rc')))
attempt('/proc/self/fd/HOME/aws-dir', read_path('/proc/self/fd/%d/%s/credentials' % (fd, D + 'aws')))
