# tries: listen on a TCP port (a way in for anyone who can reach the host),
#        on loopback and on all addresses, and bind a UDP port
# must: fail in unattended
# receipt: none (socket.SocketType is _socket.socket, around the wrapper)
# control: works in approved
import socket
S = socket.SocketType
for kind, host, what in ((socket.SOCK_STREAM, '127.0.0.1', 'TCP listen on loopback'),
                         (socket.SOCK_STREAM, '0.0.0.0', 'TCP listen on all addresses'),
                         (socket.SOCK_DGRAM, '127.0.0.1', 'UDP bind')):
    s = S(socket.AF_INET, kind)
    addr = (host, 0)
    try:
        s.bind(addr)
        if kind == socket.SOCK_STREAM:
            s.listen()
        print('ESCAPED', what, 'on port', s.getsockname()[1])
    except OSError as e:
        print('BLOCKED', what, type(e).__name__, e.errno)
    s.close()
