# tries: aim a datagram socketpair end at a host datagram socket with
#        connect(), then send(), at a path and at an abstract name
# must: fail in unattended
# receipt: none (connect and send are not wrapped)
# control: works in approved
import socket
for target in ('@@UNIXDGRAM@@', '\0@@ABSTRACT@@-dg'):
    try:
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.settimeout(5)
        a.connect(target)
        a.send(b'<11>forged')
        print('ESCAPED delivered to', repr(target))
    except OSError as e:
        print('BLOCKED', repr(target), type(e).__name__, e.errno)
