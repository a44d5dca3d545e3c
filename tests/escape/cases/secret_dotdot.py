# tries: reach secrets through '..': the home by way of its parent, the
#        working directory's .env by way of its parent, the parent's .env
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
up = os.path.join(H, '..', os.path.basename(H))
attempt('~/../USER/ssh-dir key', read_path(os.path.join(up, D + 'ssh', 'id_' + 'ed25519')))
attempt('~/ssh-dir/../ssh-dir key', read_path(os.path.join(H, D + 'ssh', '..', D + 'ssh', 'id_' + 'ed25519')))
here = os.path.basename(os.getcwd())
attempt('../WORK/env-file', read_path(os.path.join('..', here, D + 'en' + 'v')))
attempt('../env-file (parent)', read_path(os.path.join('..', D + 'en' + 'v')))
attempt('../env-file.production (parent)', read_path(os.path.join('..', D + 'en' + 'v.production')))
