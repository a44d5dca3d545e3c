"""Bad input on the client link: each gets an error frame; a fault that
loses the framing closes that connection only; the broker keeps serving."""
import os
import struct
import time

import msgpack
import pytest


def error_of(c):
    m = c.recv()
    assert m["type"] == "error", m
    return m


def assert_still_serving(broker):
    c = broker.client()
    c.exec("print('still here')")
    out = c.until_end()
    assert out["end"]["type"] == "exit" and out["stdout"] == b"still here\n"
    assert broker.alive()


def test_oversize_length_closes_connection(broker):
    c = broker.client(hello=False)
    c.sock.sendall(struct.pack(">I", 0x7FFFFFFF))
    e = error_of(c)
    assert e["code"] == "too-large"
    assert c.closed()
    assert_still_serving(broker)


def test_truncated_frame_then_eof(broker):
    c = broker.client(hello=False)
    c.sock.sendall(struct.pack(">I", 100) + b"\x81")
    c.sock.shutdown(1)
    assert c.closed()
    assert_still_serving(broker)


@pytest.mark.parametrize("payload,code", [
    (b"\x81\xa4type", "bad-msgpack"),                      # map missing its value
    (b"\x93\x01\x02\x03", "bad-msgpack"),                  # not a map
    (b"\x81\xa4type\xa5hello\x00", "bad-msgpack"),         # trailing byte
    (b"\xdd\xff\xff\xff\xff", "bad-msgpack"),              # 4G-entry array in 5 bytes
    (b"\x81\xa4type\xa3\xff\xfe\xfd", "bad-utf8"),         # invalid UTF-8
    (b"\x81\xa4type\xa3\xed\xa0\x80", "bad-utf8"),         # UTF-16 surrogate
    (msgpack.packb({"type": 7}), "bad-field"),
    (msgpack.packb({"type": "launch"}), "unknown-type"),
    (msgpack.packb({"type": "hello", "version": "1", "channel": False}), "bad-field"),
    (msgpack.packb({"type": "hello", "type2": 1}), "bad-field"),
    (b"\x82\xa4type\xa5hello\xa4type\xa4exec", "bad-field"),  # duplicate key
    (b"\x81\xa4type" + b"\x91" * 20 + b"\x00", "bad-msgpack"),  # too deep
])
def test_malformed_payload_gets_error(broker, payload, code):
    c = broker.client(hello=False)
    c.send_raw(payload)
    assert error_of(c)["code"] == code
    # framing was kept: the same connection still works
    c.hello()
    c.close()
    assert_still_serving(broker)


def test_exec_before_hello(broker):
    c = broker.client(hello=False)
    c.exec("print(1)")
    assert error_of(c)["code"] == "bad-state"


def test_second_hello(broker):
    c = broker.client()
    c.send({"type": "hello", "version": 1, "channel": False})
    assert error_of(c)["code"] == "bad-state"


PROTOCOL_MD = os.path.join(os.path.dirname(__file__), "..", "..", "proto", "PROTOCOL.md")
CLIENT_SENDS = {"hello", "exec", "answer", "cancel", "grants", "revoke", "audit"}


def protocol_vectors():
    """PROTOCOL.md's test vectors: {type: whole frame}, first of each type."""
    out = {}
    name = None
    hexes = None
    for line in open(PROTOCOL_MD):
        if line.startswith("### Vector: "):
            name = line.split(":", 1)[1].split()[0]
        elif line.startswith("```hex") and name:
            hexes = []
        elif line.startswith("```") and hexes is not None:
            out.setdefault(name, bytes.fromhex("".join(hexes)))
            name, hexes = None, None
        elif hexes is not None:
            hexes.append(line.strip())
    return out


NOT_FROM_CLIENTS = sorted(set(protocol_vectors()) - CLIENT_SENDS)


@pytest.mark.parametrize("name", NOT_FROM_CLIENTS)
def test_client_cannot_send_other_links_messages(broker, name):
    """PROTOCOL.md: a message that only the broker or a worker sends is
    answered bad-state.  Each is sent exactly as its vector, well formed,
    so only the state table can refuse it."""
    assert {"finished", "ready", "job", "welcome"} <= set(NOT_FROM_CLIENTS)
    c = broker.client()
    c.sock.sendall(protocol_vectors()[name])
    e = error_of(c)
    assert e["code"] == "bad-state" and "not a message a client sends" in e["message"], e
    c.exec("print(1)", id=2)
    assert c.until_end(id=2)["end"]["type"] == "exit"  # the connection stays usable


@pytest.mark.xfail(strict=True, reason="the broker decodes a message's fields before the "
                   "state table sees its type, so a malformed worker message is answered "
                   "bad-field; PROTOCOL.md says bad-state for any message a client never sends")
def test_malformed_worker_message_is_bad_state(broker):
    c = broker.client()
    c.send({"type": "finished", "status": "exited", "code": 0})
    assert error_of(c)["code"] == "bad-state"


def test_oversize_snippet(broker):
    c = broker.client()
    limit = c.welcome["max_snippet"]
    c.exec("#" * (limit + 1))
    e = error_of(c)
    assert e["code"] == "snippet-too-large" and str(limit) in e["message"]
    assert_still_serving(broker)


def test_duplicate_run_id(broker):
    c = broker.client()
    c.exec("import time; time.sleep(2)", id=9)
    c.exec("print(1)", id=9)
    frames = []
    while True:
        m = c.recv()
        frames.append(m)
        if m["type"] == "exit" and m["id"] == 9:
            break
    c.close()
    # The second exec is refused while the first, with the same id, runs;
    # the first is not disturbed by it: it starts and ends once.
    refusals = [m for m in frames if m["type"] == "error"]
    assert len(refusals) == 1 and refusals[0]["code"] == "bad-field", frames
    assert refusals[0]["id"] == 9 and "already in use" in refusals[0]["message"], refusals
    assert [m["type"] for m in frames if m.get("id") == 9 and m["type"] != "error"] == \
        ["started", "exit"], frames
    assert frames[-1]["status"] == "exited" and frames[-1]["code"] == 0, frames[-1]
    assert_still_serving(broker)


def test_relative_cwd_refused(broker):
    c = broker.client()
    c.exec("print(1)", cwd="relative/dir")
    assert error_of(c)["code"] == "bad-cwd"


def test_timeout_over_max_refused(broker):
    c = broker.client()
    c.exec("print(1)", timeout_ms=c.welcome["max_timeout_ms"] + 1)
    assert error_of(c)["code"] == "bad-field"


def test_version_zero_refused(broker):
    c = broker.client(hello=False)
    c.send({"type": "hello", "version": 0, "channel": False})
    assert error_of(c)["code"] == "version"
    assert c.closed()


def test_garbage_storm_does_not_stop_service(broker):
    import os
    for i in range(200):
        c = broker.client(hello=False)
        c.sock.sendall(os.urandom(1 + (i * 37) % 300))
        c.close()
    assert_still_serving(broker)


def test_client_that_does_not_read_is_throttled_not_dropped(broker):
    # 200,000 bad frames, about 17 MB of error answers: far more than the
    # broker queues for one client, so it stops reading this client until
    # it reads; then every frame still gets its answer.
    def rss_kb():
        status = open("/proc/%d/status" % broker.proc.pid).read()
        return int(status.split("VmRSS:")[1].split()[0])

    assert_still_serving(broker)
    before = rss_kb()
    c = broker.client(hello=False)
    # under valgrind, a tenth: still 1.7 MB of answers, over the bound
    n = 20000 if os.environ.get("KOTOBA_BROKER_WRAPPER") else 200000
    c.sock.settimeout(60)
    import threading
    sender = threading.Thread(target=lambda: c.sock.sendall(b"\x00\x00\x00\x01\x90" * n))
    sender.start()
    time.sleep(2)
    assert_still_serving(broker)
    grown = rss_kb() - before
    got = 0
    while got < n:
        assert error_of(c)["code"] == "bad-msgpack"
        got += 1
    sender.join()
    # AddressSanitizer keeps freed memory in quarantine and valgrind its
    # own heap: their RSS says nothing about the bound, which the plain
    # build checks.
    if not os.environ.get("KOTOBA_SANITIZED") and not os.environ.get("KOTOBA_BROKER_WRAPPER"):
        assert grown < 8 * 1024, "the broker grew by %d KiB for one client" % grown
