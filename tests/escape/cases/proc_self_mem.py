# tries: open /proc/self/mem for writing (and a forked sibling's), which
#        would let the snippet patch running code past any text check
# must: fail in unattended
# receipt: write (the worker's write witness sees the open io.FileIO makes in C)
# control: works in approved
import io
import os
# The sibling waits for the pipe to close: no kill needed (signals to
# other processes may themselves be refused).
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    os.read(r, 1)
    os._exit(0)
os.close(r)
for who in ('self', str(pid)):
    try:
        with io.FileIO('/proc/%s/mem' % who, 'r+') as f:
            print('ESCAPED opened /proc/%s/mem for writing' % who)
    except OSError as e:
        print('BLOCKED /proc/%s/mem:' % who, type(e).__name__, e.errno)
os.close(w)
os.waitpid(pid, 0)
