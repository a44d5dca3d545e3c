# tries: keep filling the scratch directory after the snippet's first
#        process has exited: a forked child in its own session makes
#        directories and files there in a loop, racing whatever removes it
# must: work in unattended
# needs: landlock (without it nothing can be made in scratch)
import io
import os
import posix
import time
tmp = os.environ['TMPDIR']
print('SCRATCH', tmp, flush=True)
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    os.close(r)
    posix.chdir(tmp)
    os.write(w, b'x')
    os.close(w)
    n = 0
    while True:
        n += 1
        try:
            posix.mkdir('d%d' % n)
            posix.chdir('d%d' % n)
            with io.FileIO('f', 'w') as f:
                f.write(b'y' * 4096)
        except OSError:
            time.sleep(0.001)
os.close(w)
print('OK the writer runs' if os.read(r, 1) == b'x' else 'FAIL no writer')
time.sleep(0.2)
