# tries: follow symlinks that already point at secrets: ~/key-link ->
#        .ssh/id_ed25519, ~/ssh-link -> .ssh, and a new symlink made in
#        TMPDIR (where it may write) pointing at the key
# must: fail in unattended
# receipt: secret-read
# control: works in approved
# needs: home (the suite plants the secrets and links in the user's home)
@@SECRET_PROBE@@
import posix
attempt('~/key-link', read_path(os.path.join(H, 'key-link')))
attempt('~/ssh-link/key', read_path(os.path.join(H, 'ssh-link', 'id_' + 'ed25519')))
attempt('realpath(~/key-link)', read_path(os.path.realpath(os.path.join(H, 'key-link'))))
mine = os.path.join(os.environ['TMPDIR'], 'my-link')
try:
    posix.symlink(os.path.join(H, D + 'ssh', 'id_' + 'ed25519'), mine)
except OSError as e:
    print('note: no symlink in TMPDIR here (%s); the planted ones stand' % e)
else:
    attempt('TMPDIR/my-link', read_path(mine))
