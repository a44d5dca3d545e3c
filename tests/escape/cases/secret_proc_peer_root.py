# tries: read the home's secrets through /proc/<pid>/root of a process of
#        the same user outside any sandbox (as a shell of theirs would be),
#        whose mount namespace has no masks
# must: fail in unattended
# control: works in approved
# needs: home (the suite starts that process as the snippet's user)
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
peer = '/proc/@@PEERPID@@'
print('note: peer uid', os.stat(peer).st_uid, 'mine', os.getuid())
attempt('peer root ~/ssh-dir key', read_path(peer + '/root' + H + '/' + D + 'ssh/id_' + 'ed25519'))
attempt('peer root ~/netrc-file', read_path(peer + '/root' + H + '/' + D + 'net' + 'rc'))
