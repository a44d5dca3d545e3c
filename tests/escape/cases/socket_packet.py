# tries: open AF_PACKET sockets (link-layer frames: sniff or inject on any
#        interface)
# must: fail in both
# receipt: none (socket.SocketType is _socket.socket, around the wrapper)
import socket
S = socket.SocketType
for kind in (socket.SOCK_RAW, socket.SOCK_DGRAM):
    try:
        S(socket.AF_PACKET, kind, 0x0300).close()
        print('ESCAPED opened an AF_PACKET socket of type', kind)
    except OSError as e:
        print('BLOCKED AF_PACKET type', kind, type(e).__name__, e.errno)
