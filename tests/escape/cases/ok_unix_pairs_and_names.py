# tries: what needs a Unix stream pair or name resolution: multiprocessing
#        Pipe (duplex and not, and across a fork), socket.socketpair,
#        an asyncio loop (its self-pipe), getaddrinfo with AI_ADDRCONFIG
#        (glibc's netlink probe) and an HTTP GET by host name
# must: work in unattended
import asyncio
import multiprocessing
import socket
import urllib.request


def child(conn):
    conn.send(conn.recv() * 2)


for duplex in (True, False):
    r, w = multiprocessing.Pipe(duplex)
    w.send(21)
    print(('OK' if r.recv() == 21 else 'FAIL') + ' Pipe(duplex=%s)' % duplex)
ctx = multiprocessing.get_context('fork')
parent, kid = ctx.Pipe()
p = ctx.Process(target=child, args=(kid,))
p.start()
parent.send(21)
print('OK Pipe across fork' if parent.poll(10) and parent.recv() == 42 else 'FAIL across fork')
p.join(10)
x, y = socket.socketpair()
x.sendall(b'ping')
print('OK socketpair' if y.recv(4) == b'ping' else 'FAIL socketpair')


async def main():
    await asyncio.sleep(0)
    return 'ran'
print('OK asyncio' if asyncio.run(main()) == 'ran' else 'FAIL asyncio')
infos = socket.getaddrinfo('localhost', 80, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG)
print('OK getaddrinfo AI_ADDRCONFIG' if infos else 'FAIL getaddrinfo')
with urllib.request.urlopen('http://localhost:@@PORT@@/hello.txt', timeout=10) as r:
    print('OK GET by name' if b'hello from the harness' in r.read() else 'FAIL GET')
