# tries: send a datagram from a socketpair end to a host datagram socket by
#        address (sendto), at a path and at an abstract name the harness
#        holds: what forging a syslog line through /dev/log takes
# must: fail in unattended
# receipt: none (sendto is not wrapped)
# control: works in approved
import socket
S = socket.SocketType
for target in ('@@UNIXDGRAM@@', '\0@@ABSTRACT@@-dg'):
    try:
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.settimeout(5)
        a.sendto(b'<11>forged', target)
        print('ESCAPED delivered to', repr(target))
    except OSError as e:
        print('BLOCKED', repr(target), type(e).__name__, e.errno)
