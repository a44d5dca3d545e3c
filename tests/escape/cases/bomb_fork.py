# tries: a fork bomb, made polite: fork children that wait, until fork fails
#        or 400 are alive (far past the suite's [limits] processes = 64)
# must: fail in both
# receipt: none (a limit, not the sandbox: RLIMIT_NPROC answers EAGAIN)
# needs: fork-bound (RLIMIT_NPROC does not bind uid 0: skipped when the
#        snippet would run as root)
import os
CAP = 400
r, w = os.pipe()
kids = 0
err = None
while kids < CAP:
    try:
        pid = os.fork()
    except OSError as e:
        err = e
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)          # wait until the parent lets go
        os._exit(0)
    kids += 1
os.close(w)                    # every child's read returns: all exit
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
if err is None:
    print('ESCAPED forked', kids, 'children without hitting a limit')
else:
    print('BLOCKED fork refused after', kids, 'children:', type(err).__name__, err.errno)
