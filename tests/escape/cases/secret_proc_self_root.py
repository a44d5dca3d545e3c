# tries: reach secrets through /proc/self/root, /proc/thread-self/root and
#        /proc/<own pid>/root, the process's view of /
# must: fail in unattended
# receipt: secret-read
# control: works in approved
# needs: home (the suite plants the secrets in the snippet user's home)
@@SECRET_PROBE@@
key = H + '/' + D + 'ssh/id_' + 'ed25519'
for root in ['/proc/self/root', '/proc/thread-self/root', '/proc/%d/root' % os.getpid()]:
    attempt(root + ' home ssh-dir key', read_path(root + key))
    attempt(root + ' cwd env-file', read_path(root + os.getcwd() + '/' + D + 'en' + 'v'))
