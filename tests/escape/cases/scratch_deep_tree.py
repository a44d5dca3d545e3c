# tries: leave a tree in the scratch directory that outlives the run: 24
#        nested names of 250 bytes (deeper than PATH_MAX), entered one
#        chdir at a time, 8 MiB written at the bottom, a directory nobody
#        may enter; a later run could read what is left
# must: work in unattended
# needs: landlock (without it no file or directory can be made in scratch)
import io
import os
import posix
tmp = os.environ['TMPDIR']
print('SCRATCH', tmp)
posix.chdir(tmp)
for _ in range(24):
    posix.mkdir('d' * 250)
    posix.chdir('d' * 250)
depth = len(posix.getcwd())
print('OK %d bytes deep' % depth if depth > 4096 else 'FAIL only %d bytes deep' % depth)
for name in ('a', 'b'):
    with io.FileIO(name, 'w') as f:
        f.write(b'\x01' * (4 << 20))
print('OK 8 MiB written')
posix.mkdir('no-entry', 0)
print('OK a directory of mode 0')
