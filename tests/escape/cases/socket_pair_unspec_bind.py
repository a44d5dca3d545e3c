# tries: disconnect a datagram socketpair end with connect(AF_UNSPEC), then
#        bind it to an abstract name (nine characters: as long as a
#        netlink address) that host processes can send to
# must: fail in unattended
# receipt: none (refused at the ctypes connect(AF_UNSPEC): bind is
#          never reached)
# control: works in approved
import builtins
import os
import socket
ct = builtins.__dict__['__imp' + 'ort__']('ct' + 'ypes')
libc = ct.CDLL(None, use_errno=True)
unspec = (ct.c_ushort * 8)(0)
try:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    if libc.connect(a.fileno(), unspec, 16) != 0:
        raise OSError(ct.get_errno(), 'connect(AF_UNSPEC)')
    a.bind('\0k%08d' % (os.getpid() % 10**8))
    print('ESCAPED bound', repr(a.getsockname()))
except OSError as e:
    print('BLOCKED', type(e).__name__, e.errno)
