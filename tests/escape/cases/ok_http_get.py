# tries: an outbound HTTP GET (to a server the harness runs on 127.0.0.1,
#        the URL a literal) and name resolution
# must: work in unattended
import socket
import urllib.request
with urllib.request.urlopen('http://127.0.0.1:@@PORT@@/hello.txt', timeout=10) as r:
    body = r.read().decode().strip()
print('OK GET' if body == 'hello from the harness' else 'FAIL GET: %r' % body)
addrs = socket.getaddrinfo('localhost', 80, proto=socket.IPPROTO_TCP)
print('OK resolve localhost:', sorted({a[4][0] for a in addrs}))
