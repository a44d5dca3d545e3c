# tries: spell secret paths with doubled and tripled slashes
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
s = '/' * 2
attempt('//home//ssh-dir//key', read_path(H.replace('/', s) + s + D + 'ssh' + s + 'id_' + 'ed25519'))
attempt('///home/netrc-file', read_path('/' + s + H.lstrip('/') + '/' + D + 'net' + 'rc'))
attempt('.//env-file', read_path('.' + s + D + 'en' + 'v'))
attempt('cwd//env-file.local', read_path(os.getcwd() + s + D + 'en' + 'v.local'))
