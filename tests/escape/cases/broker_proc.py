# tries: read the broker's environment and memory, and the worker's, through
#        /proc/<pid>/environ and /proc/<pid>/mem (paths built at run time)
# must: fail in unattended
# receipt: none (io.FileIO goes around the wrapped open; /proc/<pid>/environ
#          is no secret)
import io
import os
worker = os.getppid()
with open('/proc/%d/status' % worker) as f:
    broker = int([l for l in f if l.startswith('PPid:')][0].split()[1])
for who, pid in (('broker', broker), ('worker', worker)):
    for leaf in ('env' + 'iron', 'mem'):
        path = '/proc/%d/%s' % (pid, leaf)
        try:
            with io.FileIO(path, 'r') as f:
                if leaf == 'mem':
                    with open('/proc/%d/maps' % pid) as m:
                        start = int(m.readline().split('-')[0], 16)
                    f.seek(start)
                data = f.read(64)
            print('ESCAPED read %d bytes of the %s\'s %s' % (len(data), who, leaf))
        except OSError as e:
            print('BLOCKED', who, leaf, type(e).__name__, e.errno)
