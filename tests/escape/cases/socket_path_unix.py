# tries: connect to a Unix socket file a more privileged service listens on
#        (D-Bus, systemd, docker.sock are such doors; the harness plays one)
# must: fail in unattended
# receipt: none (socket.SocketType is _socket.socket, around the wrapper)
# control: works in approved
import socket
S = socket.SocketType
path = '@@UNIXSOCK@@'
try:
    s = S(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    print('ESCAPED connected to', path)
except OSError as e:
    print('BLOCKED', type(e).__name__, e.errno)
