# tries: reach the broker's resource limits with prlimit (lowering its
#        RLIMIT_CPU would kill it); only reads them, which needs the same
#        permission as writing
# must: fail in both
# receipt: none (resource.prlimit is not wrapped)
import os
import resource
worker = os.getppid()
with open('/proc/%d/status' % worker) as f:
    broker = int([l for l in f if l.startswith('PPid:')][0].split()[1])
for who, pid in (('broker', broker), ('worker', worker)):
    try:
        lim = resource.prlimit(pid, resource.RLIMIT_CPU)
        print('ESCAPED prlimit on the', who, 'returned', lim)
    except OSError as e:
        print('BLOCKED prlimit on the', who, type(e).__name__, e.errno)
