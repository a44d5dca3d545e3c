# tries: leave something behind that outlives the run: a SysV shared-memory
#        segment, and a POSIX shared-memory object in /dev/shm that is not
#        the run's own tmpfs (which goes with the run)
# must: fail in unattended
# receipt: none (ctypes shmget, and shm_open from C into the run's own
#          /dev/shm, which is allowed)
# receipt seccomp-only: create (shm_open's open for writing, which the filter
#          refuses and the worker's write witness records)
# control: works in approved
import builtins
import os
import _posixshmem
ct = builtins.__dict__['__imp' + 'ort__']('ct' + 'ypes')
libc = ct.CDLL(None, use_errno=True)
shmid = libc.shmget(0, 4096, 0o1600)      # IPC_PRIVATE, IPC_CREAT | 0600
if shmid >= 0:
    print('ESCAPED created SysV segment', shmid)
    libc.shmctl(shmid, 0, None)            # IPC_RMID: do not actually leave it
else:
    print('BLOCKED shmget errno', ct.get_errno())
name = '/kotoba-ipc-persist-%d' % os.getpid()
try:
    fd = _posixshmem.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
except OSError as e:
    print('BLOCKED /dev/shm:', type(e).__name__, e.errno)
else:
    os.close(fd)
    getattr(_posixshmem, 'shm_un' + 'link')(name)   # do not actually leave it
    with open('/proc/self/mountinfo') as f:
        shm = [line.split(' - ')[1].split()[1] for line in f if line.split()[4] == '/dev/shm']
    if shm and shm[-1] == 'kotoba-shm':
        print('BLOCKED /dev/shm is the run\'s own tmpfs: nothing there outlives the run')
    else:
        print('ESCAPED created /dev/shm' + name)
