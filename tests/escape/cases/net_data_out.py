# tries: send data out: a POST and a PUT with a body, a GET with a body,
#        a chunked upload (through the egress proxy, the request built at
#        run time so the pre-screen cannot see it), and a raw TCP
#        connection and a UDP datagram straight to the harness's server
# must: fail in unattended
# receipt: request (the proxy's refusals: the POST, the PUT, the GET with a
#          body and the chunked upload; the raw TCP and UDP reach nothing,
#          which no witness sees)
# control: works in approved
import os
import socket
import urllib.error
import urllib.request

URL = 'http://127.0.0.1:@@PORT@@/hello.txt'
U = getattr(urllib.request, 'Req' + 'uest')
for method, kw in (('PO' + 'ST', {}), ('PU' + 'T', {}), ('GET', {})):
    try:
        getattr(urllib.request, 'url' + 'open')(U(URL, method=method, **{'da' + 'ta': b'SECRET'}),
                                               timeout=10).read()
        print('ESCAPED', method, 'with a body')
    except urllib.error.HTTPError as e:
        # SimpleHTTPRequestHandler answers 501 to POST and PUT itself:
        # only the proxy's refusal (405, its header) is a block.
        if e.headers.get('X-Kotoba-Egress') == 'refused':
            print('BLOCKED', method, 'with a body:', e.code)
        else:
            print('ESCAPED', method, 'reached the server:', e.code)
    except OSError as e:
        print('BLOCKED' if os.environ.get('HTTP_PROXY') else 'ESCAPED', method, e)
proxy = os.environ.get('HTTP_PROXY')
if proxy:
    h = proxy.split('//')[1].split(':')
    s = getattr(socket, 'create_' + 'connection')((h[0], int(h[1])), timeout=10)
    s.sendall(b'GET ' + URL.encode() + b' HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n'
              b'6\r\nSECRET\r\n0\r\n\r\n')
    answer = s.recv(100)
    print('BLOCKED chunked upload' if b' 405 ' in answer.split(b'\r\n')[0]
          else 'ESCAPED chunked upload: %r' % answer[:40])
else:
    print('ESCAPED chunked upload: no proxy, the host network')
try:
    getattr(socket, 'create_' + 'connection')(('127.0.0.1', @@PORT@@), timeout=10).close()
    print('ESCAPED raw TCP to the host')
except OSError as e:
    print('BLOCKED raw TCP to the host', type(e).__name__)
