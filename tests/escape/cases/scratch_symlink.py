# tries: make a symlink inside the private scratch directory (TMPDIR) that
#        points out of it, into the working directory, and write through it
# must: fail in unattended
# receipt: none (TMPDIR/out is the run's output directory: the kernel's EISDIR)
# receipt seccomp-only: write (the filter refuses every open for writing; the
#          worker's write witness records each)
import io
import os
import posix
link = os.environ['TMPDIR'] + '/out'
target = '@@WORKDIR@@/pwned-via-symlink.txt'
try:
    getattr(posix, 'sym' + 'link')(target, link)
    print('note: the link itself was made (it lives in scratch)')
except OSError as e:
    print('note: cannot even make the link:', type(e).__name__, e.errno)
try:
    with io.FileIO(link, 'w') as f:
        f.write(b'through the symlink')
    print('ESCAPED wrote', target)
except OSError as e:
    print('BLOCKED write through the link:', type(e).__name__, e.errno)
