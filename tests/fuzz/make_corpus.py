#!/usr/bin/python3
"""Writes the seed corpus of every fuzz target into tests/fuzz/corpus/.

Run from the top of the tree after changing proto/PROTOCOL.md's test
vectors or the gate harness's input format; the output is checked in.
  frame   each "### Vector:" frame of PROTOCOL.md, and all client frames as
          one stream, behind the harness's two control bytes
  decode  each vector's payload
  scan    real snippets, one per label and some that match nothing
  config  dist/broker.conf and small files; config_set triples
  gate    op programs for tests/fuzz/fuzz_gate.c (its header says the format)
and the dictionaries in tests/fuzz/dict/: msgpack (type bytes, every type
name and field name as a msgpack str) for frame, decode and gate; the
pre-screen's words for scan; sections and keys for config.
"""
import hashlib
import os
import re
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(ROOT, "..", ".."))


def vectors():
    text = open(os.path.join(TOP, "proto", "PROTOCOL.md")).read()
    for m in re.finditer(r"### Vector: ([\w ()]+?)\s*\n\s*```hex\n(.*?)```", text, re.S):
        yield re.sub(r"\W+", "_", m.group(1)).strip("_"), bytes.fromhex(m.group(2))


def write(target, name, data):
    d = os.path.join(ROOT, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


SNIPPETS = {
    "plain": "print(sum(range(10)))\n",
    "fs_destroy": "import shutil\nshutil.rmtree('build')\n",
    "shell_spawn": "import subprocess\nsubprocess.run(['ls', '-l'], check=True)\n",
    "os_system": "import os\nos.system('echo hi')\n",
    "raw_socket": "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_RAW)\n",
    "dynamic_eval": "x = eval(input())\nexec(compile('1', 'f', 'eval'))\n",
    "fs_write": "with open('out.txt', 'w') as f:\n    f.write('x')\n",
    "data_out": "import urllib.request\nurllib.request.urlopen('http://example.com/', data=b'x')\n",
    "secret_read": "print(open('/etc/shadow').read())\nprint(open('~/.ssh/id_rsa').read())\n",
    "from_import": "from os import (path,\n  remove as rm)  # comment\nrm('x')\n",
    "nested_call": "open(str(dict(a=[(1, {2: 3})])), mode='w')\n",
    "numpy": "import numpy as np\nprint(np.arange(6).reshape(2, 3).sum())\n",
    "continuation": "import os\nos \\\n  .remove('x')\n",
    "utf8": "print('\u65e5\u672c\u8a9e \u2014 \U0001f600')\n",
    "getattr": "getattr(__import__('os'), 'sys' + 'tem')('id')\n",
}

CONFIGS = {
    "small": "[broker]\nmax_runs = 4\n[limits]\ntimeout = 5s\noutput = 64K\n",
    "sections": "[python]\npath = /usr/bin/python3\n[gate]\ncard_timeout = 2m\n"
                "unattended = refuse\n[sandbox]\nlandlock = no\n",
    "errors": "[broker]\nmax_runs = 0x10\nbogus = 1\n[nope]\n",
    "bom_indent": "\ufeff  [broker]\n  sandbox = docker ; comment\n",
}

SETS = [
    "broker\nsandbox\nnone\n",
    "limits\ntimeout\n90s\nlimits\ntimeout_max\n2m\n",
    "broker\nallow_users\nroot, 1000 ada\nbroker\nsocket_mode\n0600\n",
    "docker\nimage\nkotoba/python:3.11\n",
]


def msgpack_frame(obj):
    """A tiny msgpack encoder for the maps the gate programs send."""
    def enc(v):
        if isinstance(v, bool):
            return b"\xc3" if v else b"\xc2"
        if isinstance(v, int):
            return bytes([v]) if v < 128 else b"\xcf" + struct.pack(">Q", v)
        if isinstance(v, str):
            b = v.encode()
            return (bytes([0xa0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)])) + b
        if isinstance(v, dict):
            return bytes([0x80 | len(v)]) + b"".join(enc(k) + enc(x) for k, x in v.items())
        if isinstance(v, list):
            return bytes([0x90 | len(v)]) + b"".join(enc(x) for x in v)
        raise TypeError(v)
    return enc(obj)


def gate_programs():
    """Op programs; see fuzz_gate.c for the opcodes."""
    hello_ch, hello_no = b"\x02\x00\x01", b"\x02\x00\x00"
    exec_plain, exec_label = b"\x03\x00\x01\x00", b"\x03\x00\x02\x01"
    answer = lambda choice: b"\x04\x00\x00" + bytes([choice])
    yield "once", hello_ch + exec_plain + answer(0) + b"\x07\x00\x00"
    yield "always", hello_ch + exec_plain + answer(1) + exec_plain + b"\x07\x00\x01"
    yield "deny_twice", hello_ch + exec_label + answer(2) + answer(2)
    yield "expire", hello_ch + exec_plain + b"\x06\x01" + answer(0)
    yield "cancel_card", hello_ch + exec_plain + b"\x05\x00\x01"
    yield "cross_conn", b"\x00" + hello_ch + b"\x02\x01\x01" + exec_plain + \
        b"\x04\x01\x00\x00"
    yield "unattended", hello_no + exec_plain + exec_label + b"\x07\x00\x00"
    yield "close_with_card", hello_ch + exec_plain + b"\x01\x00"
    yield "shut_rd_expire", hello_ch + exec_plain + b"\x03\x00\x03\x01" + b"\x09\x00" + \
        b"\x06\x01"
    yield "grants_audit", hello_ch + b"\x08\x00\x00" + b"\x08\x00\x01" + b"\x08\x00\x02"
    raw = msgpack_frame({"type": "answer", "card": "c-0", "choice": "once"})
    yield "raw_answer", hello_ch + b"\x0a\x00" + bytes([len(raw)]) + raw


TYPES = ["hello", "welcome", "exec", "card", "answer", "started", "output", "exit",
         "cancel", "grants", "grant_list", "revoke", "audit", "audit_rows", "ok", "error",
         "job", "ready", "setup_error", "finished", "queued"]
FIELDS = ["type", "version", "channel", "client", "broker", "mode", "tools", "max_frame",
          "max_snippet", "max_timeout_ms", "id", "code", "cwd", "timeout_ms", "env", "card",
          "snippet", "labels", "label", "start", "end", "line", "options", "family",
          "family_text", "button", "detail", "expires_ms", "reason", "choice", "profile",
          "approver", "stream", "data", "status", "signal", "timed_out", "limit",
          "duration_us", "cpu_us", "max_rss_kb", "truncated", "decision", "grants",
          "saved_at_ms", "use_count", "last_used_ms", "expired", "scope", "for_ms",
          "grant_ttl_ms", "op", "max", "rows", "seq", "time_ms",
          "run", "pid", "event", "sha256", "has_exit", "exit_code", "duration_ms",
          "message", "step", "errno", "python", "scratch_base", "grace_ms", "landlock",
          "limits", "cpu_s", "as_bytes", "nproc", "fsize_bytes", "nofile",
          "landlock_abi", "position"]
WORDS = ["once", "always", "deny", "local", "docker", "none", "approved", "unattended",
         "user", "grant", "container", "stdout", "stderr", "exited", "signaled", "wall",
         "cpu", "file-size", "memory", "ran", "tail", "verify", "execute_code", "LANG",
         "fs-destroy", "shell-spawn", "raw-socket", "dynamic-eval", "fs-write", "data-out",
         "secret-read", "/tmp", "c-0000000000000000"]
SCAN_WORDS = ["import ", "from ", " as ", "os", "shutil", "subprocess", "socket", "pathlib",
              "requests", "urllib", "http", "ftplib", "smtplib", "ctypes", "pty", "eval",
              "exec", "compile", "__import__", "getattr", "open", "write", "remove",
              "unlink", "rmtree", "rmdir", "system", "popen", "Popen", "spawn", "fork",
              "connect", "sendto", "urlopen", "SOCK_RAW", "AF_INET", "/etc/shadow",
              "~/.ssh/id_rsa", ".aws/credentials", "environ", "getenv", "write_text",
              "write_bytes", "mkdir", "rename", "chmod", "truncate", "importlib", "marshal",
              "pickle", "loads", "'w'", "\"wb\"", "mode=", "(", ")", "[", "]", "{", "}",
              ".", "\\\n", "\n", "#", "'", "\"", "\"\"\"", "post", "put", "data="]
CONFIG_WORDS = ["[broker]", "[python]", "[limits]", "[gate]", "[sandbox]", "[docker]",
                "sandbox", "socket", "socket_group", "socket_mode", "state_dir", "user",
                "allow_users", "allow_groups", "worker", "max_connections", "max_runs",
                "max_runs_per_uid", "max_cards_per_conn", "path", "scratch_dir", "timeout",
                "timeout_max", "kill_grace", "output", "memory", "processes", "file_size",
                "open_files", "cpu", "snippet", "frame", "card_timeout", "grant_ttl", "unattended",
                "landlock", "cli", "image", " = ", "\n", " ;", "#", "K", "M", "G", "ms",
                "s", "m", "h", "d", "yes", "no", "true", "off", "0660", "18446744073709551615",
                "documented", "refuse", "local", "docker", "none", "\ufeff", "[quota]",
                "connections", "hello_timeout", "frame_timeout", "cards", "card_bytes",
                "audit_bytes", "audit_period", "queue", "queue_timeout"]


def dict_entry(b):
    return '"' + "".join(chr(c) if 32 <= c < 127 and chr(c) not in '"\\' else "\\x%02x" % c
                         for c in b) + '"'


def mp_str(s):
    b = s.encode()
    return (bytes([0xa0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)])) + b


def write_dicts():
    d = os.path.join(ROOT, "dict")
    os.makedirs(d, exist_ok=True)
    typebytes = [bytes([b]) for b in (0x80, 0x81, 0x8f, 0x90, 0x9f, 0xa0, 0xc0, 0xc2,
                                      0xc3, 0xc4, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd3,
                                      0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xff)]
    typebytes += [b"\xdf\xff\xff\xff\xff", b"\xdd\xff\xff\xff\xff", b"\xed\xa0\x80",
                  b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\x00\x00\x00\x00",
                  b"\x00\x40\x00\x01"]
    mp = typebytes + [mp_str(w) for w in TYPES + FIELDS + WORDS]
    with open(os.path.join(d, "msgpack.dict"), "w") as f:
        f.write("# msgpack type bytes, and every type, field and enum word of\n"
                "# proto/PROTOCOL.md as a msgpack str.  Made by make_corpus.py.\n")
        f.writelines(dict_entry(b) + "\n" for b in mp)
    for name, words in (("scan", SCAN_WORDS), ("config", CONFIG_WORDS)):
        with open(os.path.join(d, name + ".dict"), "w") as f:
            f.write("# Made by make_corpus.py.\n")
            f.writelines(dict_entry(w.encode()) + "\n" for w in words)
    for t in ("frame", "decode", "gate"):
        link = os.path.join(d, t + ".dict")
        if not os.path.lexists(link):
            os.symlink("msgpack.dict", link)


def main():
    write_dicts()
    client = b""
    for name, frame in vectors():
        write("frame", name, b"\x07\x01" + frame)
        write("decode", name, frame[4:])
        if name in ("hello", "exec", "answer", "cancel", "grants", "revoke", "audit"):
            client += frame
    # the audit trail's receipt map (AUDIT.md, `blocked`), which fuzz_decode
    # decodes too
    write("decode", "receipt_map", msgpack_frame({
        "type": "receipt",
        "blocked": [{"kind": "request", "target": "POST http://h/ refused: no", "count": 1,
                     "by": "egress proxy", "seen_by": "proxy", "inferred": False}],
        "blocked_total": 1,
        "network": [{"host": "h:80", "methods": "GET", "requests": 1, "bytes_out": 9,
                     "bytes_in": 300}]}))
    write("frame", "client_stream", b"\x07\x05" + client)
    write("frame", "oversize", b"\x03\x02" + client[:20] + b"\xff\xff\xff\xff")
    for name, code in SNIPPETS.items():
        write("scan", name, code.encode())
    with open(os.path.join(TOP, "dist", "broker.conf"), "rb") as f:
        write("config", "dist_broker_conf", b"\x00" + f.read())
    for name, text in CONFIGS.items():
        write("config", name, b"\x00" + text.encode())
    for i, text in enumerate(SETS):
        write("config", "set%d" % i, b"\x01" + text.encode())
    for name, prog in gate_programs():
        write("gate", name, prog)


if __name__ == "__main__":
    main()
