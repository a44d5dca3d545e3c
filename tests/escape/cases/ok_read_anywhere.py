# tries: read what the account can read: /etc/os-release, a file in the
#        working directory by absolute path, another directory's listing
# must: work in unattended
import os
with open('/etc/os-release') as f:
    print('OK os-release:', f.readline().strip())
with open('@@WORKDIR@@/readme-fixture.txt') as f:
    text = f.read().strip()
print('OK fixture' if text == 'kotoba escape suite fixture' else 'FAIL fixture: %r' % text)
names = os.listdir('/usr/lib')
print(('OK listing /usr/lib: %d entries' if names else 'FAIL listing /usr/lib: %d') % len(names))
