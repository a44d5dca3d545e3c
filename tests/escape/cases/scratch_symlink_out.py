# tries: leave symlinks in the scratch directory pointing at the working
#        directory's files and at the directory itself, at the top and
#        below a tree deeper than PATH_MAX, so that whatever removes scratch
#        afterwards follows them and deletes the targets
# must: work in unattended
# needs: landlock (without it no link can be made in scratch)
import os
import posix
tmp = os.environ['TMPDIR']
work = '@@WORKDIR@@'
print('SCRATCH', tmp)
posix.chdir(tmp)
for level in range(20):
    getattr(posix, 'sym' + 'link')(work, 'workdir')
    getattr(posix, 'sym' + 'link')(work + '/readme-fixture.txt', 'fixture')
    posix.mkdir('d' * 250)
    posix.chdir('d' * 250)
print('OK links at every level, %d bytes deep' % len(posix.getcwd()))
