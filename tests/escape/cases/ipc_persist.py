# tries: leave something behind that outlives the run: a SysV shared-memory
#        segment and a POSIX shared-memory object in /dev/shm
# must: fail in unattended
# receipt: none (ctypes shmget, and shm_open from C: neither witness sees them)
# control: works in approved
import builtins
import os
from multiprocessing import shared_memory
ct = builtins.__dict__['__imp' + 'ort__']('ct' + 'ypes')
libc = ct.CDLL(None, use_errno=True)
shmid = libc.shmget(0, 4096, 0o1600)      # IPC_PRIVATE, IPC_CREAT | 0600
if shmid >= 0:
    print('ESCAPED created SysV segment', shmid)
    libc.shmctl(shmid, 0, None)            # IPC_RMID: do not actually leave it
else:
    print('BLOCKED shmget errno', ct.get_errno())
try:
    shm = shared_memory.SharedMemory(create=True, size=4096)
    print('ESCAPED created /dev/shm/' + shm.name.lstrip('/'))
    shm.close()
    getattr(shm, 'un' + 'link')()
except OSError as e:
    print('BLOCKED /dev/shm:', type(e).__name__, e.errno)
