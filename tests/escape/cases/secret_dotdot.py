# tries: reach secrets through '..': the home by way of its parent, the
#        working directory's .env by way of its parent, the parent's .env
# must: fail in unattended
# receipt: secret-read
# control: works in approved
# needs: home (the suite plants the secrets in the snippet user's home)
@@SECRET_PROBE@@
up = os.path.join(H, '..', os.path.basename(H))
attempt('~/../USER/ssh-dir key', read_path(os.path.join(up, D + 'ssh', 'id_' + 'ed25519')))
attempt('~/ssh-dir/../ssh-dir key', read_path(os.path.join(H, D + 'ssh', '..', D + 'ssh', 'id_' + 'ed25519')))
here = os.path.basename(os.getcwd())
attempt('../WORK/env-file', read_path(os.path.join('..', here, D + 'en' + 'v')))
attempt('../env-file (parent)', read_path(os.path.join('..', D + 'en' + 'v')))
attempt('../env-file.production (parent)', read_path(os.path.join('..', D + 'en' + 'v.production')))
