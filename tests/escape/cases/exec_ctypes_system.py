# tries: libc's system() and a raw execve through ctypes, the module name
#        built at run time
# must: fail in unattended
# receipt: exec
# control: works in approved
import builtins
m = builtins.__dict__["__imp" + "ort__"]
ct = m('ct' + 'ypes')
libc = ct.CDLL(None, use_errno=True)
status = libc.system(b'/bin/echo spawned by libc system')
print('ESCAPED libc system() ran a shell' if status == 0 else
      'BLOCKED libc system() returned %d' % status)
