# tries: load a kernel module (init_module(2))
# must: fail in both
# receipt: none (a ctypes syscall: neither witness sees it)
import builtins
import os
ct = builtins.__dict__['__imp' + 'ort__']('ct' + 'ypes')
libc = ct.CDLL(None, use_errno=True)
libc.syscall.restype = ct.c_long
nr = {'x86_64': 175, 'aarch64': 105}[os.uname().machine]
# Only EPERM is the filter's answer.  A kernel built without modules
# answers ENOSYS, so there a rule that let the call through fails this
# case.  A kernel with modules checks CAP_SYS_MODULE before it reads any
# argument and answers a snippet EPERM itself: there this case cannot tell
# the two apart, and tests/unit/test_seccomp.c (as root, capabilities held,
# each call first made without the filter) is what proves the rule.
rc = libc.syscall(nr, ct.c_void_p(1), 1, b'')
e = ct.get_errno()
if rc >= 0:
    print('ESCAPED the call succeeded:', rc)
elif e == 1:
    print('BLOCKED errno', e, os.strerror(e))
else:
    print('ESCAPED the filter let it through to the kernel: errno', e, os.strerror(e))
