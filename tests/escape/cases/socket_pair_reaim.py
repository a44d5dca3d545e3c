# tries: re-aim a connected stream socketpair end (what multiprocessing.Pipe
#        and asyncio make) at a host socket: sendto with an address,
#        connect to a listener, connect(AF_UNSPEC) to disconnect it
# must: fail in both
# receipt: none (sendto and connect are not wrapped; connect(AF_UNSPEC)
#          is ctypes)
import builtins
import socket
ct = builtins.__dict__['__imp' + 'ort__']('ct' + 'ypes')
libc = ct.CDLL(None, use_errno=True)
unspec = (ct.c_ushort * 8)(0)
a, b = socket.socketpair()
for target in ('@@UNIXSOCK@@', '\0@@ABSTRACT@@', '@@UNIXDGRAM@@'):
    try:
        a.sendto(b'x', target)
        print('ESCAPED sendto', repr(target))
    except OSError as e:
        print('BLOCKED sendto', repr(target), type(e).__name__, e.errno)
    try:
        a.connect(target)
        print('ESCAPED connect', repr(target))
    except OSError as e:
        print('BLOCKED connect', repr(target), type(e).__name__, e.errno)
if libc.connect(a.fileno(), unspec, 16) == 0:
    print('ESCAPED connect(AF_UNSPEC)')
else:
    print('BLOCKED connect(AF_UNSPEC)', ct.get_errno())
