# tries: map a secret instead of reading it: mmap of an open fd, and
#        reopening an O_PATH fd of the secret through /proc/self/fd
# must: fail in unattended
# receipt: secret-read
# control: works in approved
# needs: home (the suite plants the secrets in the snippet user's home)
@@SECRET_PROBE@@
import mmap
import posix
O_PATH = posix.O_PATH


def mapped(p):
    def go():
        fd = os.open(p, os.O_RDONLY)
        try:
            with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as m:
                return bytes(m[:])
        finally:
            os.close(fd)
    return go


def reopened(p):
    def go():
        fd = posix.open(p, O_PATH)
        try:
            return open('/proc/self/fd/%d' % fd, 'rb').read()
        finally:
            os.close(fd)
    return go


key = os.path.join(H, D + 'ssh', 'id_' + 'ed25519')
netrc = os.path.join(H, D + 'net' + 'rc')
env = os.path.join(os.getcwd(), D + 'en' + 'v')
for what, p in [('~/ssh-dir key', key), ('~/netrc-file', netrc), ('cwd/env-file', env)]:
    attempt('mmap ' + what, mapped(p))
    attempt('O_PATH + /proc/self/fd ' + what, reopened(p))
