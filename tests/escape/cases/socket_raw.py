# tries: open raw IPv4 and IPv6 sockets (craft any packet, sniff ICMP)
# must: fail in both
# receipt: none (socket.SocketType is _socket.socket, around the wrapper)
import socket
S = socket.SocketType
for fam, proto, what in ((socket.AF_INET, 1, 'raw IPv4/ICMP'), (socket.AF_INET6, 58, 'raw IPv6/ICMPv6'),
                         (socket.AF_INET, 255, 'raw IPv4/IPPROTO_RAW')):
    try:
        S(fam, socket.SOCK_RAW, proto).close()
        print('ESCAPED opened a', what, 'socket')
    except OSError as e:
        print('BLOCKED', what, type(e).__name__, e.errno)
