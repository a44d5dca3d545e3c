# tries: read every planted secret of the home set and the .env files by a
#        path built at run time (the pre-screen cannot see the name)
# must: fail in unattended
# receipt: secret-read
# control: works in approved
# needs: home (the suite plants the secrets in the snippet user's home)
@@SECRET_PROBE@@
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
