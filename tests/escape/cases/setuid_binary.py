# tries: gain root through a setuid-root program (su, then passwd): start it,
#        and while it waits for a password read its credentials from /proc
# must: fail in both
# receipt: exec
import os
import time
import builtins
sp = builtins.__dict__['__imp' + 'ort__']('sub' + 'process')
me = os.getuid()
for prog in (['/usr/bin/su', 'root', '-c', 'id -u'], ['/usr/bin/passwd']):
    if not os.path.exists(prog[0]):
        print('note:', prog[0], 'is not installed')
        continue
    try:
        p = sp.Popen(prog, stdin=sp.PIPE, stdout=sp.PIPE, stderr=sp.PIPE)
    except OSError as e:
        print('BLOCKED', prog[0], 'did not start:', type(e).__name__, e.errno)
        continue
    time.sleep(0.5)
    try:
        with open('/proc/%d/status' % p.pid) as f:
            st = dict(line.split(':', 1) for line in f if ':' in line)
        euid = int(st['Uid'].split()[1])
        caps = int(st['CapEff'], 16)
        gained = (euid != me) or caps != 0
        print('ESCAPED' if gained else 'BLOCKED', prog[0], 'runs with euid', euid,
              'and CapEff %#x (NoNewPrivs %s)' % (caps, st['NoNewPrivs'].strip()))
    except (OSError, KeyError):
        print('BLOCKED', prog[0], 'exited at once, status', p.poll())
    p.kill()
    p.communicate()
