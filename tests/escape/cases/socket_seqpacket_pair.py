# tries: make a seqpacket socketpair and give one end an abstract name
#        host processes can find
# must: fail in unattended
# receipt: none (refused at socketpair itself, which is not wrapped)
# control: works in approved
import os
import socket
try:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    a.bind('\0@@ABSTRACT@@-sq%d' % os.getpid())
    print('ESCAPED bound', repr(a.getsockname()))
except OSError as e:
    print('BLOCKED', type(e).__name__, e.errno)
