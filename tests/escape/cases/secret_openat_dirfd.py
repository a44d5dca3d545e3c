# tries: openat() relative to a directory fd: the home's, an O_PATH fd of
#        the secret directory itself, the working directory's
# must: fail in unattended
# receipt: secret-read
# control: works in approved
# needs: home (the suite plants the secrets in the snippet user's home)
@@SECRET_PROBE@@
import posix
O_PATH = posix.O_PATH


def at(dirfd, rel):
    def go():
        fd = os.open(rel, os.O_RDONLY, dir_fd=dirfd)
        try:
            return os.read(fd, 4096)
        finally:
            os.close(fd)
    return go


home = os.open(H, os.O_RDONLY | os.O_DIRECTORY)
attempt('openat(HOME, ssh-dir/key)', at(home, D + 'ssh/id_' + 'ed25519'))
attempt('openat(HOME, gnupg-dir/...)', at(home, D + 'gnupg/private-keys-v1.d/key.key'))
try:
    ssh = posix.open(os.path.join(H, D + 'ssh'), O_PATH | os.O_DIRECTORY)
except OSError as e:
    ssh = None
    print('note: O_PATH of the directory itself:', e)
if ssh is not None:
    attempt('openat(O_PATH ssh-dir, key)', at(ssh, 'id_' + 'ed25519'))
cwd = os.open('.', os.O_RDONLY | os.O_DIRECTORY)
attempt('openat(cwd, env-file)', at(cwd, D + 'en' + 'v'))
