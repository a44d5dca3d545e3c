# tries: read the home's secrets through /proc/<pid>/root of a process of
#        the same user outside any sandbox (as a shell of theirs would be),
#        whose mount namespace has no masks
# must: fail in unattended
# receipt: secret-read
# control: works in approved
# needs: home (the suite starts that process as the snippet's user)
@@SECRET_PROBE@@
peer = '/proc/@@PEERPID@@'
print('note: peer uid', os.stat(peer).st_uid, 'mine', os.getuid())
attempt('peer root ~/ssh-dir key', read_path(peer + '/root' + H + '/' + D + 'ssh/id_' + 'ed25519'))
attempt('peer root ~/netrc-file', read_path(peer + '/root' + H + '/' + D + 'net' + 'rc'))
