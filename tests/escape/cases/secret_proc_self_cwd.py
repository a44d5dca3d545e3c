# tries: reach the working directory's .env and the home's secrets through
#        /proc/self/cwd and /proc/self/fd/<directory fd>
# must: fail in unattended
# receipt: secret-read
# control: works in approved
# needs: home (the suite plants the secrets in the snippet user's home)
@@SECRET_PROBE@@
attempt('/proc/self/cwd/env-file', read_path('/proc/self/cwd/' + D + 'en' + 'v'))
attempt('/proc/self/cwd/../env-file', read_path('/proc/self/cwd/../' + D + 'en' + 'v'))
fd = os.open(H, os.O_RDONLY | os.O_DIRECTORY)
attempt('/proc/self/fd/HOME/netrc-file', read_path('/proc/self/fd/%d/%s' % (fd, D + 'net' + 'rc')))
attempt('/proc/self/fd/HOME/aws-dir', read_path('/proc/self/fd/%d/%s/credentials' % (fd, D + 'aws')))
