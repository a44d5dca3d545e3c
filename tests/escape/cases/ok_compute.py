# tries: plain computation: print, json, math, a thread, a forked child, a
#        signal to itself
# must: work in unattended
import json
import math
import os
import signal
import threading
print('OK print')
print('OK json', json.dumps({'pi': round(math.pi, 5), 'sqrt2': math.sqrt(2)})[:20])
out = []
t = threading.Thread(target=lambda: out.append(sum(range(1000))))
t.start()
t.join()
print('OK thread' if out == [499500] else 'FAIL thread')
pid = os.fork()
if pid == 0:
    os._exit(7)
_, status = os.waitpid(pid, 0)
print('OK fork' if os.waitstatus_to_exitcode(status) == 7 else 'FAIL fork')
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
os.kill(os.getpid(), signal.SIGUSR1)
print('OK signal to itself' if got else 'FAIL signal to itself')
