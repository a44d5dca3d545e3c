# tries: read every planted secret of the home set and the .env files by a
#        path built at run time (the pre-screen cannot see the name)
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
HOME_SET = ['ssh/id_' + 'ed25519', 'aws/credentials', 'net' + 'rc', 'keystore_key',
            'gnupg/private-keys-v1.d/key.key', 'config/gcloud/credentials.db',
            'azure/accessTokens.json', 'kube/config', 'docker/config.json',
            'git-credentials', 'pgpass', 'config/gh/hosts.yml', 'pypirc', 'npmrc',
            'password-store/bank.gpg', 'local/state/kotoba/kotoba.db-wal']
for rel in HOME_SET:
    attempt('~/.' + rel, read_path(os.path.join(H, D + rel)))
for name in ['en' + 'v', 'en' + 'v.local']:
    attempt('./.' + name, read_path(D + name))
    attempt('cwd/.' + name, read_path(os.path.join(os.getcwd(), D + name)))
