# tries: read a per-user broker's own state (its audit trail keeps every
#        snippet): the planted ~/.local/state/kotoba/kotoba.db-wal, as a
#        file and through sqlite3
# must: fail in unattended
# control: works in approved
# needs: home (the suite plants the state in the snippet user's home)
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
state = os.path.join(H, D + 'local', 'state', 'kotoba')
attempt('kotoba.db-wal', read_path(os.path.join(state, 'kotoba.db-wal')))
attempt('listing the state directory', lambda: ' '.join(os.listdir(state)) + ' ' + MARK)
