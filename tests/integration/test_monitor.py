"""kotoba-monitor on its own (ARCHITECTURE.md, "The monitor's requests"):
the test plays the broker, holding the two links and the listening socket
it starts the real monitor with, and sends it what a broker an attacker
controls could send.  Needs root (the monitor starts as root and becomes
the service user with three capabilities)."""
import errno
import os
import pwd
import select
import signal
import socket
import struct
import subprocess
import tempfile
import time

import pytest

from conftest import BUILD, SERVICE_USER, ensure_service_user, ensure_user, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the monitor starts as "
                                "root and becomes the service user")

MONITOR = os.path.join(BUILD, "kotoba-monitor")
WORKER = os.path.abspath(os.path.join(BUILD, "kotoba-worker"))
SPAWN, KILL, STARTED = 1, 2, 3
REQUEST = struct.Struct("=IIiI")           # op, uid, pid, n_fds
REPLY = struct.Struct("=ii240s")           # err, pid, what
START_FAIL = struct.Struct("=Ii200s")      # step, err, what: the child's report
ATTACH = struct.Struct("=IIiI200s")        # uid, gid, pid, attached, why
EBADMSG, EPERM = 74, 1
STEP_CGROUP, STEP_WORKER = 1, 4


class Monitor:
    def __init__(self, linger_ms=0, started=True, worker=WORKER):
        ensure_service_user()
        self.dir = tempfile.mkdtemp(prefix="kotoba-mon-")
        os.chmod(self.dir, 0o755)
        self.path = os.path.join(self.dir, "s")
        self.listen = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listen.bind(self.path)
        os.chmod(self.path, 0o666)
        self.listen.listen(16)
        self.req, req_m = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.att, att_m = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = open(os.path.join(self.dir, "log"), "w+")
        svc = pwd.getpwnam(SERVICE_USER)
        root_user = pwd.getpwnam("nobody")
        args = [MONITOR, "--service-uid", str(svc.pw_uid), "--service-gid", str(svc.pw_gid),
                "--root-uid", str(root_user.pw_uid), "--worker", worker,
                "--linger-ms", str(linger_ms)]
        self.pid = os.fork()
        if self.pid == 0:
            fds = [os.dup(f) for f in (self.listen.fileno(), req_m.fileno(), att_m.fileno())]
            for i, f in enumerate(fds):
                os.dup2(f, 3 + i)
            os.dup2(self.log.fileno(), 2)
            os.closerange(6, 1 << 16)
            os.execv(MONITOR, args)
        req_m.close()
        att_m.close()
        self.req.settimeout(30)
        self.att.settimeout(30)
        wait_for(lambda: "serving" in self.read_log(), "the monitor's start")
        if started:  # as the broker says once its start-up is over
            assert self.ask(REQUEST.pack(STARTED, 0, 0, 0))[0] == 0

    def read_log(self):
        self.log.seek(0)
        return self.log.read()

    def ask(self, data, fds=()):
        socket.send_fds(self.req, [data], list(fds))
        err, pid, what = REPLY.unpack(self.req.recv(4096))
        return err, pid, what.rstrip(b"\0").decode()

    def spawn(self, uid, fds):
        return self.ask(REQUEST.pack(SPAWN, uid, 0, len(fds)), fds)

    def kill(self, pid):
        return self.ask(REQUEST.pack(KILL, 0, pid, 0))[:2]

    def attached(self):
        msg, fds, _, _ = socket.recv_fds(self.att, 4096, 1)
        uid, gid, pid, attached, why = ATTACH.unpack(msg)
        return uid, attached, why.rstrip(b"\0").decode(), fds

    def stop(self):
        self.req.close()
        self.att.close()
        wait_for(lambda: os.waitpid(self.pid, os.WNOHANG)[0] == self.pid, "the monitor's exit")


@pytest.fixture
def monitor():
    m = Monitor()
    yield m
    m.stop()


def connect_as(pw, path):
    """A connection made by a process that is pw (SO_PEERCRED says so)."""
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid)
        os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        socket.send_fds(b, [b"x"], [s.fileno()])
        os._exit(0)
    os.waitpid(pid, 0)
    _, fds, _, _ = socket.recv_fds(a, 16, 1)
    return socket.socket(fileno=fds[0])


def worker_fds():
    """What a broker hands a worker: fds 0-3 (here /dev/null and a link
    the test holds, so the worker waits for its job) and the start-report
    pipe's write end."""
    null = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    report_r, report_w = os.pipe()
    return null + [theirs.fileno(), report_w], mine, null + [theirs, report_r, report_w]


def report_of(fd):
    """All the start-report pipe held when its last writer closed it."""
    data = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 60)
        assert ready, "the start-report pipe to close"
        chunk = os.read(fd, 4096)
        if not chunk:
            return data
        data += chunk


def status(pid):
    return dict(l.split(":", 1) for l in open("/proc/%d/status" % pid))


def close_all(objs):
    for o in objs:
        o.close() if hasattr(o, "close") else os.close(o)


def test_spawns_only_for_an_attached_user(monitor):
    ta = ensure_user("kotoba-ta")
    fds, mine, keep = worker_fds()
    # No connection of this uid: refused, nothing started.
    err, pid, what = monitor.spawn(ta.pw_uid, fds)
    assert err == EPERM and pid == 0 and "no open connection" in what, what
    conn = connect_as(ta, monitor.path)
    uid, attached, why, got = monitor.attached()
    assert uid == ta.pw_uid and attached == 1, why
    err, pid, what = monitor.spawn(ta.pw_uid, fds)
    assert err == 0 and pid > 0, what
    try:
        # The worker is the broker's (here the test's) child, as its peer,
        # holding no capability.
        st = status(pid)
        assert int(st["PPid"]) == os.getpid(), st
        # The exec closes the report pipe with nothing in it.
        os.close(keep[5])
        assert report_of(keep[4]) == b""
        wait_for(lambda: status(pid)["Uid"].split()[0] == str(ta.pw_uid), "the worker's uid")
        assert int(status(pid)["CapEff"], 16) == 0 and int(status(pid)["CapPrm"], 16) == 0
    finally:
        mine.close()
        os.waitpid(pid, 0)
    # Once its connection is gone (both ends: the broker's copy too), the
    # uid is not attached any more (linger 0 here).
    conn.close()
    close_all(got)
    fds, mine, keep = worker_fds()
    wait_for(lambda: monitor.spawn(ta.pw_uid, fds)[0] == EPERM, "the detach at hang-up")
    close_all(keep)


def test_service_user_and_root_are_not_attached_as_themselves(monitor):
    svc = pwd.getpwnam(SERVICE_USER)
    conn = connect_as(svc, monitor.path)
    uid, attached, why, got = monitor.attached()
    assert uid == svc.pw_uid and attached == 0 and "service user" in why, why
    fds, mine, keep = worker_fds()
    assert monitor.spawn(svc.pw_uid, fds)[0] == EPERM
    # root attaches as root_user (nobody here): a worker never runs as 0.
    conn2 = connect_as(pwd.getpwuid(0), monitor.path)
    uid, attached, why, got2 = monitor.attached()
    assert uid == 0 and attached == 1, why
    assert monitor.spawn(0, fds)[0] == EPERM
    err, pid, what = monitor.spawn(pwd.getpwnam("nobody").pw_uid, fds)
    assert err == 0 and pid > 0, what
    mine.close()
    os.waitpid(pid, 0)
    close_all([conn, conn2] + got + got2 + keep)
    assert "not attached: the service user" in monitor.read_log()


def test_malformed_requests_are_refused_and_logged(monitor):
    fds, mine, keep = worker_fds()
    cases = [
        (b"\0" * 3, [], "wrong size"),
        (REQUEST.pack(SPAWN, 0, 0, 0) + b"\0" * 64, [], "wrong size"),
        (REQUEST.pack(SPAWN, 0, 0, 2), fds, "not the ones it names"),
        (REQUEST.pack(99, 0, 0, 0), [], "unknown request"),
        (REQUEST.pack(KILL, 0, 1, 5), fds, "carries descriptors"),
        (REQUEST.pack(SPAWN, 0, 0, 4), fds[:4], "needs 5 descriptors"),
        # The report pipe's place holding something else: the child would
        # write its report there.
        (REQUEST.pack(SPAWN, 0, 0, 5), fds[:4] + [fds[0]], "not the write end of a pipe"),
        (REQUEST.pack(SPAWN, 0, 0, 5), fds[:4] + [keep[4]], "not the write end of a pipe"),
    ]
    for data, f, words in cases:
        err, pid, what = monitor.ask(data, f)
        assert err == EBADMSG and pid == 0 and words in what, (data, what)
    # Still serving: a well-formed request is answered.
    assert monitor.spawn(12345, fds)[0] == EPERM
    assert monitor.read_log().count("refused op=") >= len(cases)
    mine.close()
    close_all(keep)


def test_kill_reaches_only_children_of_the_broker(monitor):
    # A stand-in that is not the broker's child: never signalled, whether
    # its pid was a worker's before or not.
    stand_in = subprocess.Popen(["setsid", "sleep", "300"], start_new_session=True)
    outsider = None
    try:
        # A grandchild (reparented away from the test) stands for a pid
        # another process holds now.
        r, w = os.pipe()
        mid = os.fork()
        if mid == 0:
            p = subprocess.Popen(["sleep", "300"])
            os.write(w, str(p.pid).encode())
            os._exit(0)
        os.waitpid(mid, 0)
        outsider = int(os.read(r, 32))
        err, _ = monitor.kill(outsider)
        assert err == EPERM, err
        assert os.path.exists("/proc/%d" % outsider) and \
            status(outsider)["State"].split()[0] != "Z", "the outsider was signalled"
        assert monitor.kill(1)[0] == EPERM and monitor.kill(monitor.pid)[0] == EPERM
        # A child of the broker (the test): killed.
        child = subprocess.Popen(["sleep", "300"])
        assert monitor.kill(child.pid)[0] == 0
        assert child.wait(timeout=60) == -signal.SIGKILL
        # Reaped: its pid now names nothing of the broker's.
        assert monitor.kill(child.pid)[0] != 0
    finally:
        stand_in.kill()
        stand_in.wait()
        if outsider:
            os.kill(outsider, signal.SIGKILL)


def test_monitor_ends_with_the_broker():
    m = Monitor()
    m.req.close()
    m.att.close()
    wait_for(lambda: os.waitpid(m.pid, os.WNOHANG)[0] == m.pid, "the monitor's exit")
    assert "the broker is gone" in m.read_log()


def test_a_broker_that_does_not_read_its_connections_still_gets_answers(monitor):
    """The attach link fills when the broker does not read it: the monitor
    then stops accepting (the kernel's backlog holds the rest) and goes on
    answering requests; once the broker reads, every connection comes."""
    conns = []
    full = "accepting waits for it"

    def connect_more():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(monitor.path)
            conns.append(s)
        except BlockingIOError:  # the backlog is full: the monitor is behind
            s.close()
            time.sleep(0.01)
        return full in monitor.read_log()
    wait_for(connect_more, "the monitor to find the broker's link full")
    # Answered at once, whatever the attach link holds.
    assert monitor.kill(1)[0] == EPERM
    got = 0
    while got < len(conns):
        _, attached, why, fds = monitor.attached()
        assert attached == 1, why
        close_all(fds)
        got += 1
    assert monitor.kill(1)[0] == EPERM
    close_all(conns)


def test_root_user_starts_without_a_connection_only_during_start_up():
    """The broker checks the container image at start as root_user, before
    it has read a byte from anyone; once it says its start-up is over,
    root_user's user needs a connection like any other."""
    m = Monitor(started=False)
    try:
        nobody = pwd.getpwnam("nobody").pw_uid
        fds, mine, keep = worker_fds()
        err, pid, what = m.spawn(nobody, fds)
        assert err == 0 and pid > 0, what
        mine.close()
        os.waitpid(pid, 0)
        # Never root itself, nor another user, even then.
        assert m.spawn(0, fds)[0] == EPERM
        assert m.spawn(ensure_user("kotoba-ta").pw_uid, fds)[0] == EPERM
        assert m.ask(REQUEST.pack(STARTED, 0, 0, 0))[0] == 0
        assert m.spawn(nobody, fds)[0] == EPERM
        close_all(keep)
    finally:
        m.stop()


def failed_start(monitor, fds, mine, keep):
    """Spawns for an attached user a start that fails in the child: the
    monitor answers with its pid all the same; the child, the test's own
    (CLONE_PARENT), ends with nothing on the worker link and its report on
    the pipe."""
    ta = ensure_user("kotoba-ta")
    conn = connect_as(ta, monitor.path)
    _, attached, why, got = monitor.attached()
    assert attached == 1, why
    err, pid, what = monitor.spawn(ta.pw_uid, fds)
    assert err == 0 and pid > 0, what
    os.close(keep[5])
    report = report_of(keep[4])
    _, st = os.waitpid(pid, 0)
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 127, st
    close_all(keep[:4])
    mine.settimeout(60)
    assert mine.recv(4096) == b"", "the link carries no frame of a start that failed"
    close_all([conn, mine] + got + [keep[4]])
    assert len(report) == START_FAIL.size, report
    step, err, what = START_FAIL.unpack(report)
    return step, err, what.rstrip(b"\0").decode()


def test_an_exec_that_fails_after_the_answer_is_reported_on_the_pipe():
    m = Monitor(worker="/nonexistent/kotoba-worker")
    try:
        fds, mine, keep = worker_fds()
        step, err, what = failed_start(m, fds, mine, keep)
        assert step == STEP_WORKER and err == errno.ENOENT, (step, err, what)
        assert "cannot exec kotoba-worker" in what, what
    finally:
        m.stop()


def test_a_cgroup_that_cannot_be_joined_is_reported_on_the_pipe(monitor):
    # A cgroup.procs the child cannot write (read-only): the kernel's EBADF.
    fds, mine, keep = worker_fds()
    procs = os.open("/dev/null", os.O_RDONLY)
    step, err, what = failed_start(monitor, fds + [procs], mine, keep)
    os.close(procs)
    assert step == STEP_CGROUP and err == errno.EBADF, (step, err, what)
    assert "cgroup" in what, what


def test_a_child_killed_before_its_identity_switch_leaves_no_report(monitor):
    """The answer comes before the child's steps, so the broker may kill a
    child that is still the monitor's code as the service user: it is the
    broker's child all the same (CLONE_PARENT), and MON_KILL reaches it.
    Here the child is held at its first step, a cgroup.procs write into a
    full pipe, so it cannot have switched."""
    svc = pwd.getpwnam(SERVICE_USER)
    held_r, held_w = os.pipe2(os.O_NONBLOCK)
    try:
        while True:
            os.write(held_w, b"x" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(held_w, True)
    fds, mine, keep = worker_fds()
    ta = ensure_user("kotoba-ta")
    conn = connect_as(ta, monitor.path)
    _, attached, why, got = monitor.attached()
    assert attached == 1, why
    err, pid, what = monitor.spawn(ta.pw_uid, fds + [held_w])
    assert err == 0 and pid > 0, what
    os.close(held_w)
    assert int(status(pid)["PPid"]) == os.getpid()
    assert status(pid)["Uid"].split()[0] == str(svc.pw_uid), status(pid)
    assert monitor.kill(pid)[0] == 0
    _, st = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGKILL, st
    # Neither a report nor a frame: the broker ends such a run worker-lost.
    os.close(keep[5])
    assert report_of(keep[4]) == b""
    close_all(keep[:4])
    mine.settimeout(60)
    assert mine.recv(4096) == b""
    close_all([conn, mine, held_r] + got + [keep[4]])
