# tries: create a BPF map (bpf(2))
# must: fail in both
# receipt: none (a ctypes syscall: neither witness sees it)
import builtins
import os
ct = builtins.__dict__['__imp' + 'ort__']('ct' + 'ypes')
libc = ct.CDLL(None, use_errno=True)
libc.syscall.restype = ct.c_long
nr = {'x86_64': 321, 'aarch64': 280}[os.uname().machine]
rc = libc.syscall(nr, 0, ct.create_string_buffer(128), 128)
e = ct.get_errno()
# EPERM or ENOSYS: refused before the kernel acted on it.  Anything else
# (EINVAL, EFAULT...) means the call reached the kernel code behind it.
if rc >= 0:
    print('ESCAPED the call succeeded:', rc)
elif e in (1, 38):
    print('BLOCKED errno', e, os.strerror(e))
else:
    print('ESCAPED reached the kernel: errno', e, os.strerror(e))
