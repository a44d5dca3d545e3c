# tries: every other way to a second exec, through raw syscalls: execve,
#        execveat with a bogus dirfd and an absolute path (the dirfd is then
#        ignored), execveat of an fd, fexecve of a memfd copy, re-exec of
#        python itself, and the dynamic loader running /bin/true
# must: fail in unattended
# receipt: exec
# control: works in approved
import os
import builtins
m = builtins.__dict__["__imp" + "ort__"]
ct = m('ct' + 'ypes')
libc = ct.CDLL(None, use_errno=True)
libc.syscall.restype = ct.c_long
NR = {'x86_64': (59, 322), 'aarch64': (221, 281)}[os.uname().machine]
AT_EMPTY_PATH = 0x1000

def argv(*words):
    a = (ct.c_char_p * (len(words) + 1))(*[w.encode() for w in words], None)
    return a

def try_exec(what, fn):
    # Each try runs in a child, so a success does not end this test.
    pid = os.fork()
    if pid == 0:
        fn()
        os._exit(100 + ct.get_errno() % 100)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code >= 100:
        print('BLOCKED', what, 'errno', code - 100)
    else:
        print('ESCAPED', what, 'exit', code)

env = (ct.c_char_p * 1)(None)
try_exec('execve', lambda: libc.syscall(NR[0], b'/bin/true', argv('true'), env))
try_exec('execveat absolute', lambda: libc.syscall(NR[1], 1023, b'/bin/true', argv('true'), env, AT_EMPTY_PATH))
fd = os.open('/bin/true', os.O_RDONLY)
try_exec('execveat fd', lambda: libc.syscall(NR[1], fd, b'', argv('true'), env, AT_EMPTY_PATH))
mfd = os.memfd_create('t')
with open('/bin/true', 'rb') as src:
    os.write(mfd, src.read())
try_exec('fexecve memfd', lambda: libc.syscall(NR[1], mfd, b'', argv('true'), env, AT_EMPTY_PATH))
try_exec('python again', lambda: libc.syscall(NR[0], b'/proc/self/exe', argv('python3', '-c', 'pass'), env))
ld = [p for p in ('/lib64/ld-linux-x86-64.so.2', '/lib/ld-linux-aarch64.so.1') if os.path.exists(p)]
if ld:
    try_exec('dynamic loader', lambda: libc.syscall(NR[0], ld[0].encode(), argv('ld.so', '/bin/true'), env))
