# tries: fill the disk: write 1 MiB blocks to one file in TMPDIR until
#        refused or 256 MiB are written (the suite sets [limits] file_size = 8M)
# must: fail in both
# receipt: none (a limit, not the sandbox: RLIMIT_FSIZE answers EFBIG)
# receipt seccomp-only: create (the filter refuses the file in TMPDIR; the
#          worker's write witness records it)
import io
import os
import signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # EFBIG rather than death
path = os.environ['TMPDIR'] + '/fill'
written = 0
try:
    with io.FileIO(path, 'w') as f:
        while written < (256 << 20):
            written += f.write(b'\0' * (1 << 20))
    print('ESCAPED wrote', written >> 20, 'MiB to one file')
except OSError as e:
    print('BLOCKED after', written >> 20, 'MiB:', type(e).__name__, e.errno)
