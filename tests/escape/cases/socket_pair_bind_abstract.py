# tries: give a connected stream socketpair end an abstract address host
#        processes can find: by bind (nine characters, as long as a
#        netlink address, and longer), and by autobind (SO_PASSCRED, then
#        connect)
# must: fail in unattended
# receipt: bind (both binds; the autobind is a connect, not wrapped)
# control: works in approved
import os
import socket
for name in ('\0s%08d' % (os.getpid() % 10**8), '\0@@ABSTRACT@@-st%d' % os.getpid()):
    try:
        a, b = socket.socketpair()
        a.bind(name)
        print('ESCAPED bound', repr(a.getsockname()))
    except OSError as e:
        print('BLOCKED bind', type(e).__name__, e.errno)
try:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    try:
        a.connect('\0@@ABSTRACT@@')
    except OSError:
        pass
    name = a.getsockname()
    print(('ESCAPED autobound ' + repr(name)) if name else 'BLOCKED no address')
except OSError as e:
    print('BLOCKED autobind', type(e).__name__, e.errno)
