# tries: connect to an abstract Unix socket a process outside the snippet
#        listens on (the test harness plays that process)
# must: fail in unattended
# receipt: none (socket.SocketType is _socket.socket, around the wrapper)
# control: works in approved
import socket
S = socket.SocketType
name = '\0@@ABSTRACT@@'
try:
    s = S(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(name)
    print('ESCAPED connected to the abstract socket')
except OSError as e:
    print('BLOCKED', type(e).__name__, e.errno)
