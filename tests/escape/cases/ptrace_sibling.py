# tries: attach to a forked sibling with ptrace, read its memory with
#        process_vm_readv, and take its fd 1 with pidfd_getfd
# must: fail in both
# receipt: none (ctypes calls bypass both witnesses)
import builtins
import os
ct = builtins.__dict__['__imp' + 'ort__']('ct' + 'ypes')
libc = ct.CDLL(None, use_errno=True)
libc.syscall.restype = ct.c_long
NR = {'x86_64': {'ptrace': 101, 'process_vm_readv': 310, 'pidfd_open': 434, 'pidfd_getfd': 438},
      'aarch64': {'ptrace': 117, 'process_vm_readv': 270, 'pidfd_open': 434, 'pidfd_getfd': 438}}
nr = NR[os.uname().machine]
# The sibling waits for the pipe to close: no kill needed (signals to
# other processes may themselves be refused).
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    os.read(r, 1)
    os._exit(0)
os.close(r)


def verdict(what, rc):
    e = ct.get_errno()
    if rc >= 0:
        print('ESCAPED', what, 'returned', rc)
    elif e in (1, 13, 38):       # EPERM, EACCES, ENOSYS: refused before the kernel acted
        print('BLOCKED', what, 'errno', e)
    else:
        print('ESCAPED', what, 'reached the kernel: errno', e)


verdict('ptrace attach', libc.syscall(nr['ptrace'], 16, pid, None, None))
buf = ct.create_string_buffer(16)
iov = (ct.c_void_p * 2)(ct.cast(buf, ct.c_void_p), 16)
verdict('process_vm_readv', libc.syscall(nr['process_vm_readv'], pid, iov, 1, iov, 1, 0))
pidfd = libc.syscall(nr['pidfd_open'], pid, 0)
verdict('pidfd_getfd', libc.syscall(nr['pidfd_getfd'], pidfd, 1, 0))
os.close(w)
os.waitpid(pid, 0)
