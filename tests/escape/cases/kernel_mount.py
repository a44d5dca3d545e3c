# tries: mount a tmpfs (mount(2))
# must: fail in both
# receipt: none (a ctypes syscall: neither witness sees it)
import builtins
import os
ct = builtins.__dict__['__imp' + 'ort__']('ct' + 'ypes')
libc = ct.CDLL(None, use_errno=True)
libc.syscall.restype = ct.c_long
nr = {'x86_64': 165, 'aarch64': 40}[os.uname().machine]
# On a directory that does not exist: the kernel looks the target up
# before it checks CAP_SYS_ADMIN and before Landlock's mount hook, so
# without the filter any caller gets ENOENT (checked as nobody and as
# root).  EPERM is the filter's answer alone.
rc = libc.syscall(nr, b'none', b'/nonexistent-kotoba-mnt', b'tmpfs', 0, None)
e = ct.get_errno()
if rc >= 0:
    print('ESCAPED the call succeeded:', rc)
elif e == 1:
    print('BLOCKED errno', e, os.strerror(e))
else:
    print('ESCAPED the filter let it through to the kernel: errno', e, os.strerror(e))
