# tries: spell secret paths with doubled and tripled slashes
# must: fail in unattended
# receipt: secret-read
# control: works in approved
# needs: home (the suite plants the secrets in the snippet user's home)
@@SECRET_PROBE@@
s = '/' * 2
attempt('//home//ssh-dir//key', read_path(H.replace('/', s) + s + D + 'ssh' + s + 'id_' + 'ed25519'))
attempt('///home/netrc-file', read_path('/' + s + H.lstrip('/') + '/' + D + 'net' + 'rc'))
attempt('.//env-file', read_path('.' + s + D + 'en' + 'v'))
attempt('cwd//env-file.local', read_path(os.getcwd() + s + D + 'en' + 'v.local'))
