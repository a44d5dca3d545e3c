# tries: fork, then exec another program in the child with os.execv (the
#        name built at run time)
# must: fail in unattended
# receipt: exec
# control: works in approved
import os
import posix
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    os.dup2(w, 1)
    try:
        getattr(posix, 'ex' + 'ecv')('/bin/echo', ['echo', 'ESCAPED exec in the forked child'])
    except OSError as e:
        os.write(1, b'BLOCKED exec in the forked child: %d\n' % e.errno)
    os._exit(0)
os.close(w)
out = b''
while True:
    chunk = os.read(r, 4096)
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
print(out.decode().strip())
