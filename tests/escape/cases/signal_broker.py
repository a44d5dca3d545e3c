# tries: signal the worker supervising this snippet and the broker above it
#        (SIGURG: ignored by default, so a success harms nothing but fails
#        the case)
# must: fail in unattended
# receipt: signal (the worker; the broker is another user's, which the
#          user's own permissions refuse)
import os
import signal
worker = os.getppid()
with open('/proc/%d/status' % worker) as f:
    broker = int([l for l in f if l.startswith('PPid:')][0].split()[1])
for who, pid in (('worker', worker), ('broker', broker)):
    try:
        os.kill(pid, signal.SIGURG)
        print('ESCAPED signalled the', who, pid)
    except OSError as e:
        print('BLOCKED signal to the', who, type(e).__name__, e.errno)
