// link: broker/scan.c
/* SPDX-License-Identifier: MIT
 * Unit tests of broker/scan.c, the execute_code pre-screen: every row of
 * the spec's measured table, positives and negatives for each label, the
 * spans, the size limit, the report, and linear time on adversarial text.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "broker/scan.h"
#include "tests/scan_text.h"

#define FD (1u << SCAN_FS_DESTROY)
#define SS (1u << SCAN_SHELL_SPAWN)
#define RS (1u << SCAN_RAW_SOCKET)
#define DE (1u << SCAN_DYNAMIC_EVAL)
#define FW (1u << SCAN_FS_WRITE)
#define DO (1u << SCAN_DATA_OUT)
#define SR (1u << SCAN_SECRET_READ)

#define MIB (1024u * 1024u)
#define BIG (64u * MIB)

struct scase {
	const char *code;
	unsigned want;
};

/* ---- helpers ----------------------------------------------------------- */

static unsigned mask_of(const struct scan_result *r)
{
	unsigned m = 0;

	for (size_t i = 0; i < r->n; i++)
		m |= 1u << r->hits[i].label;
	return m;
}

static void mask_str(unsigned m, char *buf, size_t n)
{
	buf[0] = 0;
	for (int l = 0; l < SCAN_LABEL_COUNT; l++) {
		if (m & (1u << l)) {
			strncat(buf, scan_label_name((enum scan_label)l), n - strlen(buf) - 1);
			strncat(buf, " ", n - strlen(buf) - 1);
		}
	}
	if (!m)
		snprintf(buf, n, "(none)");
}

/* The labels of code run there; no case here may owe its answer to a
 * PCRE2 limit. */
static unsigned scan_mask_for(const char *code, enum scan_where where)
{
	struct scan_result r;

	assert_int_equal(scan_snippet_for(code, strlen(code), BIG, where, &r), 0);
	for (size_t i = 0; i < r.n; i++) {
		if (r.hits[i].limited)
			fail_msg("%s reached a PCRE2 limit on: %s",
				 scan_label_name(r.hits[i].label), code);
	}
	return mask_of(&r);
}

static void check_cases_for(const struct scase *c, size_t n, enum scan_where where)
{
	char got[128], want[128];
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned m = scan_mask_for(c[i].code, where);

		if (m == c[i].want)
			continue;
		mask_str(m, got, sizeof(got));
		mask_str(c[i].want, want, sizeof(want));
		print_error("case %zu%s: %s\n   want %s\n   got  %s\n", i,
			    where == SCAN_ON_HOST ? "" : " (in a container)", c[i].code, want, got);
		bad++;
	}
	assert_int_equal(bad, 0);
}

#define CHECK_FOR(tab, where) check_cases_for(tab, sizeof(tab) / sizeof(tab[0]), where)
#define CHECK(tab) CHECK_FOR(tab, SCAN_ON_HOST)

static int setup(void **state)
{
	char err[256];

	(void)state;
	if (scan_init(err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	scan_fini();
	return 0;
}

/* ---- the spec's measured table ----------------------------------------- */

static void test_spec_table(void **state)
{
	static const struct scase c[] = {
		/* plain computation */
		{ "x = sum(i * i for i in range(10))\nprint(x)\n", 0 },
		/* writing a file */
		{ "with open(\"out.txt\", \"w\") as f:\n    f.write(\"hi\")\n", FW },
		/* appending to a dotfile */
		{ "open(os.path.expanduser(\"~/.bashrc\"), \"a\").write(\"alias x=y\\n\")\n", FW },
		/* shutil.rmtree */
		{ "import shutil\nshutil.rmtree(\"build\")\n", FD },
		/* subprocess.run(...), import os as o, ctypes, importlib */
		{ "import subprocess\nsubprocess.run([\"ls\", \"-l\"])\n", SS },
		{ "import os as o\nprint(o.getcwd())\n", SS },
		{ "import ctypes\nlibc = ctypes.CDLL(None)\n", SS },
		{ "import importlib\nm = importlib.import_module(\"json\")\n", SS },
		/* a bare import subprocess, with no call */
		{ "import subprocess\nprint(42)\n", 0 },
		/* eval(...) */
		{ "print(eval(\"1 + 2\"))\n", DE },
		/* opening a raw socket */
		{ "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n", RS },
		/* an HTTP post, or a get with an f-string URL */
		{ "import requests\nrequests.post(\"https://example.com/api\", json={\"a\": 1})\n", DO },
		{ "import requests\nr = requests.get(f\"https://example.com/?q={word}\")\n", DO },
		/* reading an SSH key or a .env */
		{ "print(open(os.path.expanduser(\"~/.ssh/id_rsa\")).read())\n", SR },
		{ "print(open(\".env\").read())\n", SR },
		/* the grant's honest statement: these run with no card */
		{ "print(open(\"/etc/hostname\").read())\n", 0 },
		{ "import os\nprint(os.listdir(\"/usr\"))\n", 0 },
		{ "import requests\nprint(requests.get(\"https://example.com\").status_code)\n", 0 },
	};

	(void)state;
	CHECK(c);
	CHECK_FOR(c, SCAN_IN_CONTAINER);
}

/* ---- per label ---------------------------------------------------------- */

static void test_fs_destroy(void **state)
{
	static const struct scase c[] = {
		{ "os.remove(\"x\")", FD },
		{ "os.unlink(p)", FD },
		{ "os.rmdir(d)", FD },
		{ "os.removedirs(d)", FD },
		{ "shutil.rmtree(d, ignore_errors=True)", FD },
		{ "shutil . rmtree(d)", FD },
		{ "Path(p).unlink()", FD },
		{ "p.rmdir()", FD },
		{ "from shutil import rmtree\nrmtree(d)\n", FD },
		{ "from os import path, remove\n", FD },
		{ "from os import (\n    path,  # paths\n    rmdir,\n)\n", FD },
		{ "from shutil import *\n", FD | FW },	/* copy and move too */
		{ "import shutil as sh\nsh.rmtree(d)\n", FD },
		/* not deleting */
		{ "from os import path\n", 0 },
		{ "xs = [1, 2]\nxs.remove(1)\n", 0 },
		{ "os.path.exists(p)", 0 },
		{ "import shutil\nprint(shutil.which(\"ls\"))\n", 0 },
		{ "from os import path\nremove_me = 1\n", 0 },
	};

	(void)state;
	CHECK(c);
}

static void test_shell_spawn(void **state)
{
	static const struct scase c[] = {
		{ "os.system(\"ls\")", SS },
		{ "os.popen(\"ls\").read()", SS },
		{ "os.execvp(\"ls\", [\"ls\"])", SS },
		{ "os.spawnlp(os.P_WAIT, \"ls\", \"ls\")", SS },
		{ "os.posix_spawnp(\"ls\", [\"ls\"], {})", SS },
		/* posix is os's C half: the same calls under another name */
		{ "import posix\nposix.execv(\"/bin/sh\", [\"sh\"])\n", SS },
		{ "from posix import system\nsystem(\"id\")\n", SS },
		{ "import posix as p\n", SS },
		{ "import _posixsubprocess\n", SS },
		{ "import os\nif os.name == \"posix\":\n    print(os.getcwd())\n", 0 },
		{ "import pty\npty.spawn(\"/bin/sh\")\n", SS },
		{ "subprocess.Popen([\"ls\"])", SS },
		{ "subprocess.check_output([\"id\"])", SS },
		{ "x = subprocess.PIPE", SS },
		{ "await asyncio.create_subprocess_exec(\"ls\")", SS },
		{ "from ctypes import CDLL", SS },
		{ "from importlib import import_module", SS },
		{ "from os import system\nsystem(\"ls\")\n", SS },
		{ "from os import getcwd, execv\n", SS },
		{ "from os import *\n", SS | FD | FW },
		{ "from subprocess import run\n", SS },
		{ "import subprocess as sp\n", SS },
		{ "import sys, subprocess as sp\n", SS },
		{ "import json, os as _o, sys\n", SS },
		{ "m = os\nm.system(\"ls\")\n", SS },
		{ "run(os)", SS },
		{ "getattr(os, \"sys\" + \"tem\")(\"ls\")", SS },
		{ "sys.modules[\"os\"].system(\"ls\")", SS },
		/* the import without a use, and other os use */
		{ "import subprocess\n", 0 },
		{ "import subprocess, json\nprint(json.dumps(1))\n", 0 },
		{ "import os\nimport sys, os\nprint(os.getcwd())\n", 0 },
		{ "import os.path as osp\nprint(osp.join(\"a\", \"b\"))\n", 0 },
		{ "from os import path\n", 0 },
		{ "positions = [1, 2]\nprint(\"hello os\")\n", 0 },
		{ "import osmosis as om\n", 0 },
	};

	(void)state;
	CHECK(c);
}

static void test_raw_socket(void **state)
{
	static const struct scase c[] = {
		{ "s = socket.socket()", RS },
		{ "socket.create_connection((\"h\", 80))", RS },
		{ "from socket import socket\ns = socket()\n", RS },
		{ "from socket import AF_INET, socket\n", RS },
		{ "import socket as so\n", RS },
		{ "s.connect((\"10.0.0.1\", 22))", RS },
		{ "s.connect( (host, port) )", RS },
		{ "r, w = await asyncio.open_connection(\"h\", 1)", RS },
		/* not raw */
		{ "import socket\nprint(socket.gethostname())\n", 0 },
		{ "db = sqlite3.connect(\"x.db\")", FW }, /* a file database: fs-write, not a socket */
		{ "conn.connect(dsn)", 0 },
	};

	(void)state;
	CHECK(c);
}

static void test_dynamic_eval(void **state)
{
	static const struct scase c[] = {
		{ "eval(s)", DE },
		{ "exec(\"x = 1\")", DE },
		{ "exec (code)", DE },
		{ "m = __import__(\"os\")", DE },
		{ "code = compile(src, \"<s>\", \"exec\")", DE },
		{ "builtins.eval(\"1\")", DE },
		{ "__builtins__[\"eval\"](\"1\")", DE },
		{ "list(map(eval, xs))", DE },
		{ "f = exec\n", DE },
		{ "from builtins import exec as run\n", DE },
		{ "pickle.loads(blob)", DE },
		{ "import runpy\n", DE },
		/* methods and other names */
		{ "model.eval()", 0 },
		{ "app.exec()", 0 },
		{ "rx = re.compile(\"a+\")", 0 },
		{ "evaluate(x)", 0 },
		{ "retval(x)", 0 },
		{ "print(\"exec\")", 0 },
	};

	(void)state;
	CHECK(c);
}

static void test_fs_write(void **state)
{
	static const struct scase c[] = {
		{ "open(\"x\", \"w\")", FW },
		{ "open('x', 'wb')", FW },
		{ "open(\"x\", \"r+\")", FW },
		{ "open(\"x\", \"x\")", FW },
		{ "open(\"log\", \"ab\")", FW },
		/* the mode found across balanced brackets */
		{ "open(os.path.join(d, \"f\"), \"w\")", FW },
		{ "open(os.path.join(os.getcwd(), name[0], cfg[\"a\"]), \"a\")", FW },
		{ "with open(\n    os.path.join(\n        root, f(g(h(1)))),\n    \"w\") as f:\n",
		  FW },
		{ "open(\"out.txt\", mode=\"a\")", FW },
		{ "open(file=p, mode=\"w\", encoding=\"utf-8\")", FW },
		{ "open(p, encoding=\"utf-8\", mode = 'w')", FW },
		{ "open(p, mode)", FW },
		{ "open(*args)", FW },
		{ "open(f(g(h(i(j(k(l(\"x\"))))))), \"r\")", FW },
		{ "io.open(p, \"w\")", FW },
		{ "gzip.open(p, \"wt\")", FW },
		{ "Path(\"x\").open(\"w\")", FW },
		{ "zf.open(name, mode=\"w\")", FW },
		{ "os.fdopen(fd, \"w\")", FW },
		{ "Path(\"x\").write_text(\"y\")", FW },
		{ "p.write_bytes(b\"y\")", FW },
		{ "os.open(\"x\", os.O_WRONLY | os.O_CREAT)", FW },
		{ "os.open(\"x\", 577)", FW },
		{ "shutil.copy(\"a\", \"b\")", FW },
		{ "shutil.copytree(\"a\", \"b\")", FW },
		{ "shutil.move(\"a\", \"b\")", FW },
		{ "os.rename(\"a\", \"b\")", FW },
		{ "os.replace(\"a\", \"b\")", FW },
		{ "os.chmod(\"a\", 0o600)", FW },
		{ "os.chown(\"a\", 0, 0)", FW },
		{ "from shutil import copyfile\n", FW },
		{ "from os import rename\n", FW },
		{ "f = open\nf(\"x\", \"w\")\n", FW },
		{ "w = functools.partial(open, mode=\"w\")", FW },
		/* library writers given a path */
		{ "df.to_csv(\"summary.csv\")", FW },
		{ "df.to_csv(\"summary.csv\", index=False)", FW },
		{ "df.to_csv(index=False, path_or_buf=out)", FW },
		{ "df.to_parquet(os.path.join(d, \"x.parquet\"))", FW },
		{ "df.to_excel(\"x.xlsx\", sheet_name=\"a\")", FW },
		{ "df.to_json(\"x.json\", orient=\"records\")", FW },
		{ "df.groupby(\"a\").sum().to_csv(f\"{name}.csv\")", FW },
		{ "arr.tofile(\"a.bin\")", FW },
		{ "np.save(\"a.npy\", arr)", FW },
		{ "numpy.savetxt(\"a.txt\", arr)", FW },
		{ "np.savez_compressed(p, a=arr)", FW },
		{ "from numpy import savez\n", FW },
		{ "torch.save(model.state_dict(), \"m.pt\")", FW },
		{ "plt.savefig(\"sales.png\")", FW },
		{ "fig.savefig(\"sales.png\", dpi=150)", FW },
		{ "plt.savefig(os.path.join(os.getcwd(), \"sales.png\"))", FW },
		{ "con = sqlite3.connect(\"results.db\")", FW },
		{ "con = sqlite3.connect(db_path)", FW },
		{ "con = sqlite3.connect(\"file:r.db?mode=rwc\", uri=True)", FW },
		{ "from sqlite3 import connect\n", FW },
		{ "logging.basicConfig(filename=\"run.log\", level=logging.INFO)", FW },
		{ "logging.basicConfig(level=logging.INFO, filename=p)", FW },
		{ "h = logging.FileHandler(\"run.log\")", FW },
		{ "h = RotatingFileHandler(\"run.log\", maxBytes=1000)", FW },
		{ "h = logging.handlers.TimedRotatingFileHandler(p)", FW },
		{ "zipfile.ZipFile(\"out.zip\", \"w\")", FW },
		{ "with ZipFile(p, mode=\"a\") as z:\n", FW },
		{ "tarfile.open(\"out.tar.gz\", \"w:gz\")", FW },
		/* their near misses: no path, memory, reads (the output directory:
		 * test_fs_write_own_places) */
		{ "s = df.to_csv(index=False)", 0 },
		{ "print(df.to_json(orient=\"records\"))", 0 },
		{ "print(df.to_string())", 0 },
		{ "df = pd.read_csv(\"data.csv\")", 0 },
		{ "a = np.load(\"a.npy\")", 0 },
		{ "plt.show()", 0 },
		{ "con = sqlite3.connect(\":memory:\")", 0 },
		{ "con = sqlite3.connect(database=':memory:')", 0 },
		{ "con = sqlite3.connect(\"file:r.db?mode=ro\", uri=True)", 0 },
		/* ... and beside them: another write, a path that only mentions the
		 * name after its first comma, open as a value */
		{ "open(os.path.join(os.environ[\"KOTOBA_OUTPUT_DIR\"], \"a\"), \"w\")\n"
		  "open(\"b.txt\", \"w\")", FW },
		{ "open(os.path.join(os.environ[\"HOME\"], \"KOTOBA_OUTPUT_DIR\"), \"w\")", FW },
		{ "w = open\nw(os.environ[\"KOTOBA_OUTPUT_DIR\"] + \"/a\", \"w\")", FW },
		{ "logging.basicConfig(level=logging.INFO)", 0 },
		{ "h = logging.StreamHandler()", 0 },
		{ "z = zipfile.ZipFile(\"in.zip\")", 0 },
		{ "z = zipfile.ZipFile(\"in.zip\", \"r\")", 0 },
		/* reading */
		{ "open(\"x\")", 0 },
		{ "open(\"x\", \"r\")", 0 },
		{ "open(\"x\", \"rb\")", 0 },
		{ "open('x', 'rt', encoding='utf-8')", 0 },
		{ "open(\"x\", encoding=\"utf-8\", errors=\"replace\")", 0 },
		{ "open(os.path.join(a, \"b\"), \"r\", encoding=\"utf-8\")", 0 },
		{ "open(p, mode=\"rb\")", 0 },
		{ "Path(\"x\").open()", 0 },
		{ "Image.open(path)", 0 },
		{ "webbrowser.open(url)", 0 },
		{ "os.open(\"data.bin\", os.O_RDONLY)", 0 },
		{ "fd = os.open(p, flags=os.O_RDONLY | os.O_CLOEXEC)", 0 },
		{ "reopen(\"x\", \"w\")", 0 },
		{ "s = \"a\".replace(\"a\", \"w\")", 0 },
		{ "shutil.which(\"ls\")", 0 },
		{ "opened = open_file(p)", 0 },
	};

	(void)state;
	CHECK(c);
}

/*
 * Writes whose path names the run's own places ($KOTOBA_OUTPUT_DIR, TMPDIR,
 * gettempdir, mkdtemp) ask for no card on the host, where a run nobody read
 * can write nowhere else; in a container the working directory is the
 * user's, mounted read-write, and a fallback path lands there, so the same
 * writes are fs-write.
 */
static void test_fs_write_own_places(void **state)
{
	static const char *const own[] = {
		"plt.savefig(os.path.join(os.environ[\"KOTOBA_OUTPUT_DIR\"], \"sales.png\"))",
		"fig.savefig(f\"{os.environ['KOTOBA_OUTPUT_DIR']}/sales.png\")",
		"db = sqlite3.connect(os.path.join(os.environ['TMPDIR'], 'work.db'))",
		"plt.savefig(os.path.join(tempfile.gettempdir(), \"a.png\"))",
		"open(os.path.join(os.environ[\"KOTOBA_OUTPUT_DIR\"], \"a.txt\"), \"w\")",
		"with open(f\"{os.environ['KOTOBA_OUTPUT_DIR']}/a.csv\", \"w\") as f:\n",
		"f = open(os.path.join(tempfile.gettempdir(), 'x.json'), 'w')",
		"d = tempfile.mkdtemp()\nopen(os.path.join(tempfile.mkdtemp(), 'a'), 'w')",
		"open(os.environ.get(\"KOTOBA_OUTPUT_DIR\") or \"notes.txt\", \"w\").write(\"x\")",
		"con = sqlite3.connect(os.environ.get('TMPDIR', '.') + '/w.db')",
		"plt.savefig((os.environ.get('KOTOBA_OUTPUT_DIR') or '.') + '/p.png')",
	};
	struct scase host[sizeof(own) / sizeof(own[0])], container[sizeof(own) / sizeof(own[0])];

	(void)state;
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		host[i] = (struct scase){ own[i], 0 };
		container[i] = (struct scase){ own[i], FW };
	}
	CHECK_FOR(host, SCAN_ON_HOST);
	CHECK_FOR(container, SCAN_IN_CONTAINER);
	/* the exemption's edges hold in a container too */
	assert_int_equal(scan_mask_for("con = sqlite3.connect(\":memory:\")", SCAN_IN_CONTAINER), 0);
	assert_int_equal(scan_mask_for("plt.show()", SCAN_IN_CONTAINER), 0);
	assert_int_equal(scan_mask_for("open(\"x\", \"r\")", SCAN_IN_CONTAINER), 0);
}

static void test_data_out(void **state)
{
	static const struct scase c[] = {
		{ "requests.post(u, data=d)", DO },
		{ "session.post(u)", DO },
		{ "await client.post(\"/x\")", DO },
		{ "httpx.put(u, json=d)", DO },
		{ "my_session.patch(u, json=d)", DO },
		{ "requests.request(\"POST\", u)", DO },
		{ "http.request(\"post\", \"https://x\")", DO },
		{ "urllib.request.Request(u, method=\"PUT\")", DO },
		/* a get whose URL is built */
		{ "requests.get(url)", DO },
		{ "requests.get(\"https://x/\" + q)", DO },
		{ "requests.get(\"https://x/?q=%s\" % q)", DO },
		{ "requests.get(\"https://x/{}\".format(q))", DO },
		{ "httpx.get(rf\"https://x/{q}\")", DO },
		{ "requests.get(url=base)", DO },
		{ "requests.get(\"https://x\", params={\"q\": s})", DO },
		{ "sess.get(\"https://x\", timeout=3, data=s)", DO },
		{ "requests.request(\"GET\", f\"https://x/{q}\")", DO },
		{ "g.get(f\"https://x/{q}\")", DO },
		{ "urlopen(f\"https://x/{q}\")", DO },
		{ "urllib.request.urlopen(\"https://x\", data=b\"1\")", DO },
		{ "urlopen(\"https://x\", body)", DO },
		{ "urlopen(Request(\"https://x\", data=b\"1\"))", DO },
		{ "req = Request(u)", DO },
		{ "import smtplib\n", DO },
		{ "from ftplib import FTP\n", DO },
		{ "import paramiko\n", DO },
		{ "from requests import post\n", DO },
		{ "import requests as rq\n", DO },
		/* plain fetching */
		{ "requests.get(\"https://example.com\", timeout=5)", 0 },
		{ "requests.get(\n    'https://example.com/a'\n)", 0 },
		{ "urlopen(\"https://example.com\")", 0 },
		{ "urllib.request.urlopen(urllib.request.Request(\"https://e.com\"))", 0 },
		{ "d.get(\"key\")", 0 },
		{ "d.get(f\"key{x}\")", 0 },
		{ "config.get(name, default)", 0 },
		{ "os.environ.get(name)", 0 },
		{ "q.put(item)", 0 },
		{ "mock.patch(\"a.b\")", 0 },
	};

	(void)state;
	CHECK(c);
}

static void test_secret_read(void **state)
{
	static const struct scase c[] = {
		{ "open(\"/home/me/.ssh/id_ed25519\")", SR },
		{ "os.path.join(home, \".ssh\")", SR },
		{ "open(\"/etc/shadow\")", SR },
		{ "open(\"/etc/passwd\").read()", SR },
		{ "open(os.path.expanduser(\"~/.aws/credentials\"))", SR },
		{ "open(r\"C:\\Users\\me\\.aws\\credentials\")", SR },
		{ "open(\"C:\\\\Users\\\\me\\\\.aws\\\\credentials\")", SR },
		{ "open(os.path.expanduser(\"~/.netrc\"))", SR },
		{ "k = open(\".keystore_key\").read()", SR },
		{ "open('.env')", SR },
		{ "open(f\"{root}/.env\")", SR },
		{ "open(\"C:\\\\proj\\\\.env\")", SR },
		{ "p = Path.home() / \".env.local\"", SR },
		{ "from dotenv import load_dotenv\nload_dotenv()\n", SR },
		{ "open(f\"/proc/{pid}/environ\")", SR },
		/* not secrets */
		{ "os.environ[\"HOME\"]", 0 },
		{ "os.environ.get(\"X\")", 0 },
		{ "self.env.reset()", 0 },
		{ "env = gym.make(\"x\").env", 0 },
		{ "cfg.environment = 1", 0 },
		{ "open(\".envrc\")", 0 },
		{ "open(\"/etc/hostname\")", 0 },
		{ "import ssh_helpers", 0 },
	};

	(void)state;
	CHECK(c);
}

/* ---- the code view: comments and strings are not code ------------------ */

static void test_code_view(void **state)
{
	static const struct scase c[] = {
		/* call patterns in strings and comments, and a method named eval */
		{ "x = \"eval(\" in s\n", 0 },
		{ "s = 'subprocess.run([\"ls\"])'\n", 0 },
		{ "# subprocess.run([\"ls\"])\nprint(1)\n", 0 },
		{ "x = 1  # os.system(\"ls\")\n", 0 },
		{ "class M:\n    def eval(self):\n        return 1\n", 0 },
		{ "def exec(self, q):\n    pass\n", 0 },
		{ "def  compile(self):\n    pass\n", 0 },
		{ "\"\"\"\nimport os as o\nshutil.rmtree(d)\n\"\"\"\n", 0 },
		{ "x = '''open(\"f\", \"w\")'''\n", 0 },
		{ "print(\"call os.remove(p) to delete\")\n", 0 },
		{ "log(\"requests.post(u, data=d)\")\n", 0 },
		{ "x = b'exec(' + rb\"eval(\"\n", 0 },
		/* replacement fields are code */
		{ "print(f\"{os.system(x)}\")\n", SS },
		{ "print(f\"{x!r:>{os.system(w)}}\")\n", SS },
		{ "print(t\"{os.system(x)}\")\n", SS },
		{ "print(Rf'{os.system(\"ls\")}')\n", SS },
		{ "print(f\"{'{'}{os.system(x)}\")\n", SS },
		{ "print(f\"{f'{os.system(x)}'}\")\n", SS },
		{ "print(f'''{\n  os.system(x)}''')\n", SS },
		{ "print(f\"{{os.system(x)}}\")\n", 0 },	/* escaped braces: text */
		/* a quote in a format spec is text, so what follows is code */
		{ "print(f\"{x:'}\") ; os.system(y) ; z = f\"{x:'}\"\n", SS },
		{ "print(f\"{x:{y:'}}\") ; os.system(z) ; w = f\"{x:{y:'}}\"\n", SS },
		{ "print(f\"{x:{y:{os.system(z)}}}\")\n", SS },
		/* where strings end */
		{ "x = \"a\\\\\" ; os.system(y) #\"\n", SS },
		{ "x = \"a\\\r\n\" ; os.system(y) #\"\n", SS },
		{ "s = r\"\\\"\" ; os.system(y) #\"\n", SS },
		{ "x = \"\"\"a\"b\"\"\" ; os.system(y)\n", SS },
		{ "x = ''''''; os.system(y)\n", SS },
		{ "x = \"\" ; os.system(y)\n", SS },
		{ "x = 'a\nos.system(y)\n", SS },	/* unterminated: the line ends it */
		{ "x = 1 # c\ros.system(y)\n", SS },		/* CR ends a comment */
		{ "f(eval  # c\n  (x))\n", DE },	/* a comment is a blank */
		/* text Python may decode otherwise is read as it is */
		{ "# -*- coding: utf-7 -*-\nx = \"+ACI-; os.system(y) ;+ACI-\"\n", SS },
		{ "# coding: utf-8\nx = \"os.system(y)\"\n", 0 },
		{ "x = f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{"
		  "f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{f\"{'os.system(y)'\n", SS },
		/* a snippet that can run a string as code has its strings read as code */
		{ "import timeit\ntimeit.timeit(\"import os; os.system('id')\", number=1)\n", SS },
		{ "s = \"os.system('id')\"\nexec(s)\n", SS | DE },
		{ "code.InteractiveConsole().push(\"os.system('id')\")\n", SS },
		{ "print(f\"{eval(x)}\")\n", DE },
		{ "s = \"os.system('id')\"\nprint(s)\n", 0 },
		/* secret-read and module names still read strings, not comments */
		{ "p = \"~/.ssh/id_rsa\"\n", SR },
		{ "open(f\"{home}/.aws/credentials\")\n", SR },
		{ "# reads ~/.ssh/config\n", 0 },
		{ "m = __import__(\"ctypes\")\n", SS | DE },
		{ "f = pkgutil.resolve_name(\"ctypes:CDLL\")\n", SS },
		/* open()'s mode and the HTTP method are read in the code view */
		{ "open(p, \"wb+\")\n", FW },
		{ "open(p, 'r')\n", 0 },
		{ "requests.request('PATCH', u)\n", DO },
		{ "requests.get(\"https://x/?q=\" + q)\n", DO },
	};

	(void)state;
	CHECK(c);
}

/* ---- the coding declaration python3 reads --------------------------------- */

static void test_declared_encoding(void **state)
{
	static const struct {
		const char *code, *name; /* NULL: no declaration */
		bool utf8;
	} c[] = {
		{ "# -*- coding: utf-7 -*-\nprint(1)\n", "utf-7", false },
		{ "#!/usr/bin/python3\n# coding=UTF_7\n", "UTF_7", false },
		{ "#x\r# coding: utf-7\n", "utf-7", false },	/* CR ends line 1 */
		{ "#x\r\n  \f# vim: set fileencoding=latin-1 :\n", "latin-1", false },
		{ "\xef\xbb\xbf# coding: utf-7\n", "utf-7", false },
		{ "\n# coding: u7\n", "u7", false },
		{ "# coding: \n# coding: utf-7\n", "utf-7", false },
		{ "# coding:  utf-8\n", "utf-8", true },
		{ "# -*- coding: UTF_8-sig -*-\n", "UTF_8-sig", true },
		{ "# coding=utf8\n", "utf8", true },
		{ "# coding: ascii\n", "ascii", true },
		/* not a declaration to python3 */
		{ "x = 1  # coding: utf-7\n", NULL, false },
		{ "print(2)\n# coding: utf-7\n", NULL, false },
		{ "#\n#\n# coding: utf-7\n", NULL, false },
		{ "open(p, encoding=\"utf-7\")\n", NULL, false },
		{ "# coding: +AAo-\n", NULL, false },
		{ "# codingutf-7\n", NULL, false },
		{ "", NULL, false },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		const char *name = NULL;
		size_t len = 0;
		bool found = scan_declared_encoding(c[i].code, strlen(c[i].code), &name, &len);

		if (!c[i].name) {
			if (found)
				fail_msg("case %zu: found '%.*s'", i, (int)len, name);
			continue;
		}
		if (!found || len != strlen(c[i].name) || memcmp(name, c[i].name, len))
			fail_msg("case %zu: expected '%s'", i, c[i].name);
		assert_int_equal(scan_encoding_is_utf8(name, len), c[i].utf8);
	}
}

/* ---- data-out through the names a snippet binds ------------------------- */

static void test_data_out_names(void **state)
{
	static const struct scase c[] = {
		/* HTTP client objects */
		{ "import requests\ns = requests.Session(); s.put(url, data=payload)\n", DO },
		{ "requests.Session().patch(u, json=d)\n", DO },
		{ "with httpx.Client() as c:\n    c.put(u, content=b)\n", DO },
		{ "async with httpx.AsyncClient() as c:\n    await c.put(u, content=b)\n", DO },
		{ "async with httpx.AsyncClient(timeout=5) as c:\n    await c.patch(u)\n", DO },
		{ "async with aiohttp.ClientSession() as s:\n    await s.put(u, data=d)\n", DO },
		{ "s = aiohttp.ClientSession()\nawait s.post(u, data=d)\n", DO },
		{ "urllib3.PoolManager().request(\"POST\", u, body=b)\n", DO },
		{ "pool = urllib3.PoolManager()\npool.request(\"PUT\", u, body=b)\n", DO },
		{ "c = http.client.HTTPConnection(\"h\")\nc.request(\"POST\", \"/x\", body)\n", DO },
		{ "http.client.HTTPSConnection(\"h\").request(\"PATCH\", \"/x\", b)\n", DO },
		{ "urllib.request.build_opener().open(u, data=b)\n", DO },
		{ "opener = urllib.request.build_opener()\nopener.open(u, b)\n", DO },
		{ "from requests import Session\ns = Session()\ns.put(u)\n", DO },
		{ "s = requests . Session()\ns.put(u)\n", DO },
		{ "from urllib.request import build_opener\no = build_opener()\no.open(u, b)\n", DO },
		{ "c = urllib3.connection_from_url(u)\nc.put(x)\n", DO },
		{ "self.http = requests.Session()\nself.http.put(u, data=d)\n", DO },
		{ "s = requests.Session()\ns.get(u)\n", DO },
		{ "s = requests.Session()\ns.get(\"https://x\", params={\"q\": q})\n", DO },
		/* a fullwidth s is s to Python (NFKC) */
		{ "\xef\xbd\x93 = requests.Session()\ns.put(u)\n", DO },
		/* a GET of a name bound to a URL built from a string */
		{ "url = \"https://x.test/?q=\" + secret\ns.get(url)\n", DO },
		{ "url = f\"https://x.test/?q={secret}\"\nthing.get(url)\n", DO },
		{ "url = \"https://x.test/?q={}\".format(secret)\nthing.get(url)\n", DO },
		{ "url = \"https://x.test/?q=%s\" % secret\nthing.get(url)\n", DO },
		{ "url = \"https://x.test/?q=\"\nurl += secret\nthing.get(url)\n", DO },
		{ "base = \"https://x.test\"\nurl = base + \"/?q=\" + q\nthing.get(url)\n", DO },
		{ "base = \"https://x.test\"\nurl = f\"{base}/?q={q}\"\nthing.get(url)\n", DO },
		{ "url = \"https://x.test/?q=\" + secret\n"
		  "urllib.request.build_opener().open(url)\n", DO },
		{ "url = \"https://x.test/?q=\" + secret\nrequests.get(url)\n", DO },
		{ "from requests import get\nurl = \"https://x/?q=\" + q\nget(url)\n", DO },
		{ "url = \"https://x.test/?q=\" + secret\nurlopen(url)\n", DO },
		/* a name bound to a literal and to something else */
		{ "URL = \"https://x\"\nURL = URL + q\nsession.get(URL)\n", DO },
		{ "URL = \"https://x\"\nglobals()[\"URL\"] += q\nsession.get(URL)\n", DO },
		{ "URL = \"https://x\"\nfor URL in urls:\n    session.get(URL)\n", DO },
		{ "URL = \"https://x\"\nfor (URL) in urls:\n    session.get(URL)\n", DO },
		{ "URL = \"https://x\"\ndef f(URL):\n    return session.get(URL)\n", DO },
		{ "URL = \"https://x\"\nfrom m import *\nsession.get(URL)\n", DO },
		{ "URL = \"https://x\"\nsys._getframe().f_globals[\"URL\"] += q\nsession.get(URL)\n",
		  DO },
		{ "URL = \"https://x\"\n(lambda: 0).__globals__[\"URL\"] += q\nsession.get(URL)\n",
		  DO },
		{ "URL = \"https://x\"\nwith open(p) as URL:\n    pass\nsession.get(URL)\n", DO },
		{ "URL = \"https://x\"\n\xef\xbc\xb5RL = f\"https://x/{q}\"\nsession.get(URL)\n", DO },
		/* near misses: a literal URL, a name bound to a literal, not a client */
		{ "s = requests.Session()\ns.get(\"https://x\")\n", 0 },
		{ "with httpx.Client() as c:\n    r = c.get(\"https://x\", timeout=5)\n", 0 },
		{ "URL = \"https://x\"\nsession = requests.Session()\nsession.get(URL)\n", 0 },
		{ "URL = \"https://x\"\nr = requests.get(URL, timeout=5)\nprint(URL, r.status_code)\n",
		  0 },
		{ "URL = 'https://x'  # the API\nr = urlopen(URL)\n", 0 },
		{ "base = \"https://x\"\nr = requests.get(base)\n", 0 },
		{ "url = \"https://x\"\nd.get(url)\n", 0 },
		{ "opener = build_opener()\nopener.open(\"https://x\")\n", 0 },
		{ "q = queue.Queue()\nq.put(x)\n", 0 },
		{ "d.update(x)\nobj.put_item(Item=x)\ncache.put(k, v)\n", 0 },
		{ "s = requests.Session()\nq.put(x)\n", 0 },
		{ "key = \"a\" + b\nd.get(key)\n", 0 },
		{ "db = sqlalchemy.orm.Session()\ndb.get(User, 1)\n", 0 },
		{ "from sqlalchemy.orm import Session\ns = Session()\ns.put(x)\n", 0 },
		{ "s = foo.Session()\ns.put(x)\n", 0 },
	};

	(void)state;
	CHECK(c);
}

/* ---- spans, order, size, report ----------------------------------------- */

static void test_spans(void **state)
{
	const char *code = "x = 1\ny = 2\nshutil.rmtree(d)\nopen(p, \"w\")\neval(s)\n";
	struct scan_result r;

	(void)state;
	assert_int_equal(scan_snippet(code, strlen(code), BIG, &r), 0);
	assert_int_equal(r.n, 3);
	/* label order, not text order */
	assert_int_equal(r.hits[0].label, SCAN_FS_DESTROY);
	assert_int_equal(r.hits[1].label, SCAN_DYNAMIC_EVAL);
	assert_int_equal(r.hits[2].label, SCAN_FS_WRITE);

	assert_int_equal(r.hits[0].start, 12);
	assert_int_equal(r.hits[0].end, 12 + strlen("shutil.rmtree"));
	assert_int_equal(r.hits[0].line, 3);
	assert_false(r.hits[0].limited);

	assert_int_equal(r.hits[1].start, 42);
	assert_int_equal(r.hits[1].end, 42 + strlen("eval("));
	assert_int_equal(r.hits[1].line, 5);

	/* the match ends where the mode argument begins */
	assert_int_equal(r.hits[2].start, 29);
	assert_int_equal(r.hits[2].end, 29 + strlen("open(p, "));
	assert_int_equal(r.hits[2].line, 4);

	/* the first of several matches */
	code = "os.remove(a)\nos.remove(b)\n";
	assert_int_equal(scan_snippet(code, strlen(code), BIG, &r), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.hits[0].start, 0);
	assert_int_equal(r.hits[0].end, 9);
	assert_int_equal(r.hits[0].line, 1);
}

static void test_size_limit(void **state)
{
	const char *code = "print(1)\n";
	struct scan_result r;

	(void)state;
	assert_int_equal(scan_snippet(code, 9, 8, &r), -E2BIG);
	assert_int_equal(scan_snippet(code, 9, 9, &r), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(scan_snippet("", 0, 0, &r), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(scan_snippet(NULL, 0, 0, &r), 0);
	assert_int_equal(scan_snippet(code, 9, 9, NULL), -EINVAL);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(scan_label_name(SCAN_FS_DESTROY), "fs-destroy");
	assert_string_equal(scan_label_name(SCAN_SHELL_SPAWN), "shell-spawn");
	assert_string_equal(scan_label_name(SCAN_RAW_SOCKET), "raw-socket");
	assert_string_equal(scan_label_name(SCAN_DYNAMIC_EVAL), "dynamic-eval");
	assert_string_equal(scan_label_name(SCAN_FS_WRITE), "fs-write");
	assert_string_equal(scan_label_name(SCAN_DATA_OUT), "data-out");
	assert_string_equal(scan_label_name(SCAN_SECRET_READ), "secret-read");
	assert_string_equal(scan_label_summary(SCAN_FS_DESTROY), "deletes files");
	assert_string_equal(scan_label_summary(SCAN_SHELL_SPAWN), "starts other programs");
	assert_string_equal(scan_label_summary(SCAN_RAW_SOCKET), "opens a raw network socket");
	assert_string_equal(scan_label_summary(SCAN_DYNAMIC_EVAL),
			    "evaluates code built at run time");
	assert_string_equal(scan_label_summary(SCAN_FS_WRITE), "writes files");
	assert_string_equal(scan_label_summary(SCAN_DATA_OUT), "sends data out over the network");
	assert_string_equal(scan_label_summary(SCAN_SECRET_READ),
			    "reads secrets such as keys or credentials");
}

static char *report(const char *code)
{
	struct scan_result r;
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	assert_non_null(f);
	assert_int_equal(scan_snippet(code, strlen(code), BIG, &r), 0);
	scan_print(f, code, strlen(code), &r);
	fclose(f);
	return buf;
}

static void test_print(void **state)
{
	char *s;

	(void)state;
	s = report("x = 1\n");
	assert_string_equal(s, "no labels\n");
	free(s);

	s = report("x = 1\ny = 2\nshutil.rmtree(d)\nopen(p,\n     \"w\")\n");
	assert_string_equal(s, "fs-destroy  line 3  bytes 12-25  shutil.rmtree\n"
			       "fs-write  line 4  bytes 29-42  open(p,\n");
	free(s);

	/* a terminal escape in the matched text is shown, not sent */
	s = report("open(\"\x1b" "c\x07\", \"w\")");
	assert_string_equal(s, "fs-write  line 1  bytes 0-12  open(\"\\x1bc\\x07\",\n");
	free(s);

	/* long matches are cut */
	s = report("open(aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, m)");
	assert_non_null(strstr(s, "aaaa...\n"));
	assert_true(strlen(s) < 140);
	free(s);
}

/* ---- linear time -------------------------------------------------------- */

/* CPU time of this thread: a busy machine delays a scan but does not
 * change what it costs, and the ratio below should not depend on load. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Best of a few runs: the least disturbed by caches and frequency. */
static double time_scan(const char *code, size_t len, struct scan_result *r, int runs)
{
	double best = 1e9;

	for (int i = 0; i < runs; i++) {
		double t0 = now(), t;

		assert_int_equal(scan_snippet(code, len, BIG, r), 0);
		t = now() - t0;
		if (t < best)
			best = t;
	}
	return best;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Python source from the standard library, in a stable order, up to cap. */
static size_t load_stdlib(char *buf, size_t cap)
{
	const char *dir = "/usr/lib/python3.11";
	char *names[1024], path[512];
	size_t n = 0, len = 0;
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < 1024) {
		size_t l = strlen(e->d_name);

		if (l > 3 && !strcmp(e->d_name + l - 3, ".py"))
			names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_str);
	for (size_t i = 0; i < n; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (len < cap && (f = fopen(path, "r"))) {
			len += fread(buf + len, 1, cap - len, f);
			fclose(f);
		}
		free(names[i]);
	}
	return len;
}

static void sanitize(char *s, size_t len)
{
	if (blank_flagged(s, len, BIG) < 0)
		fail_msg("could not blank the flagged lines");
}

/*
 * How a scan's time grows with its input: the whole text against its first
 * quarter.  Linear time gives about 4, quadratic 16.  Unlike the ratio to
 * ordinary code it does not depend on how fast the C parts (the code view,
 * the name tests) are built against PCRE2's JIT code (a sanitizer build).
 */
static double growth(const char *s, size_t len, struct scan_result *r)
{
	double g = time_scan(s, len, r, 5) / time_scan(s, len / 4, r, 5);

	if (g > 6.0)	/* a busy machine: measured again, longer */
		g = time_scan(s, len, r, 15) / time_scan(s, len / 4, r, 15);
	time_scan(s, len, r, 1);	/* r describes the whole text */
	return g;
}

struct adversary {
	const char *what, *head, *unit;
	unsigned want;	/* labels it really matches */
	bool growth;	/* its growth is checked too (the C parts' adversaries) */
};

static const struct adversary adversaries[] = {
	{ "nested open(", "", "open(", FW, false },	/* too deep to read: flagged */
	{ "nested open(os.path.join(", "", "open(os.path.join(", FW, false },
	{ "nested f(", "", "f(", 0, false },
	{ "open( then 1 MiB of ()", "open(x", "()", 0, false },
	{ "open( then 1 MiB of args", "open(x", "a = b + c ", 0, false },
	{ "open(x, \"w unclosed", "open(x", ", \"w", FW, false },
	{ "\"w", "", "\"w", 0, false },
	{ "quotes", "", "'\"", 0, false },
	{ "brackets [", "", "[", 0, false },
	{ "braces {", "", "{", 0, false },
	{ "subprocess", "", "subprocess ", 0, false },
	{ "subprocess .", "", "subprocess\\ ", 0, false },
	{ "os spaces", "os", " ", 0, false },
	{ "backslashes", "os", "\\", 0, false },
	{ "requests.get(", "", "requests.get(", DO, false },
	{ "requests.get no call", "", "requests.get ", 0, false },
	{ "requests.get(\"https://", "", "requests.get(\"https://", DO, false },
	{ "session.get(lit, paramsx=", "session.get(\"https://e.com\"", ", paramsx=1", 0, false },
	{ "urlopen(", "", "urlopen(", DO, false },
	{ "Request(", "", "Request(", DO, false },
	{ ".pos", "", ".pos ", 0, false },
	{ "os.open(O", "os.open(", "O", 0, false },
	{ "os.open(O_RDONLY", "os.open(", "O_RDONLY ", 0, false },
	{ ".connect(", "", ".connect(", 0, false },
	{ "from os import a,", "", "from os import a, ", 0, false },
	{ "from os import (a,", "", "from os import (a, ", 0, false },
	{ "long import list", "from os import a", ", a", 0, false },
	{ "import a,", "", "import a, ", 0, false },
	{ "import os", "", "import os ", 0, false },
	{ "x.eval(", "", "x.eval(", 0, false },
	{ ".env lookalikes", "", "os.environ.envx ", 0, false },
	{ "/etc/", "", "/etc/", 0, false },
	{ "/proc/", "", "/proc/", 0, false },
	{ "id_", "", "id_", 0, false },
	{ "= o", "", "= o", 0, false },
	/* the code view */
	{ "unterminated strings", "", "\"a\n", 0, true },
	{ "triple quotes", "", "'''\"\"\"", 0, true },
	{ "unterminated triple quote", "'''", "\\'\n", 0, true },
	{ "nested f-strings", "", "f\"{", 0, true },
	{ "format specs", "x = f\"{x:", "{x:", 0, true },
	{ "escapes", "\"", "\\\\", 0, true },
	{ "comments", "", "#(\n", 0, true },
	/* names */
	{ "put on a non-client", "s = requests.Session()\n", "q.put(1)\n", 0, true },
	{ "payload gets on a non-client", "s = requests.Session()\n", "d.get(k, data=1)\n", 0, true },
	{ "nested gets on a non-client", "s = requests.Session()\n", "q.get(a, ", 0, true },
	{ "get of a non-URL", "u = \"https://x\" + q\n", "d.get(k)\n", 0, true },
	{ "gets of a literal URL", "U = \"https://x\"\n", "requests.get(U)\n", 0, true },
	{ "built URLs", "", "u = \"https://x\" + q\n", 0, true },
	{ "client constructors", "", "requests.Session(", 0, true },
	{ "with client as", "", "with httpx.Client() as c: ", 0, true },
	{ "opened clients", "", "requests.Session().", 0, true },
};

static void test_linear_time(void **state)
{
	struct scan_result r;
	char *ord = malloc(MIB), *adv = malloc(MIB);
	size_t olen;
	double t_ord, t_raw, worst = 0, ratio, g, worst_growth = 0;
	const char *worst_what = "", *worst_growth_what = "";
	int bad = 0;

	(void)state;
	assert_non_null(ord);
	assert_non_null(adv);
	olen = load_stdlib(ord, MIB);
	if (olen < MIB / 2) {
		free(ord);
		free(adv);
		skip();
		return;
	}
	t_raw = time_scan(ord, olen, &r, 5);
	sanitize(ord, olen);
	t_ord = time_scan(ord, olen, &r, 5);
	assert_int_equal(r.n, 0);
	printf("  scan of ordinary code (%zu bytes, no labels): %.1f ms, %.0f MB/s\n", olen,
	       t_ord * 1e3, (double)olen / 1e6 / t_ord);
	printf("  (the same library code before blanking: %.1f ms)\n", t_raw * 1e3);

	for (size_t i = 0; i < sizeof(adversaries) / sizeof(adversaries[0]); i++) {
		const struct adversary *a = &adversaries[i];
		size_t len = repeat(adv, MIB, a->head, a->unit);
		double t = time_scan(adv, len, &r, 5);

		ratio = t / t_ord;
		char got[128], want[128];

		/* A high ratio on a busy machine is measured again, longer,
		 * against a fresh baseline before it is believed. */
		if (ratio > 5.0)
			ratio = time_scan(adv, len, &r, 15) / time_scan(ord, olen, &r, 15);

		g = a->growth ? growth(adv, len, &r) : 0;
		if (g > worst_growth) {
			worst_growth = g;
			worst_growth_what = a->what;
		}
		for (size_t k = 0; k < r.n; k++) {
			if (r.hits[k].limited) {
				print_error("%s: %s reached the PCRE2 limit\n", a->what,
					    scan_label_name(r.hits[k].label));
				bad++;
			}
		}
		if (mask_of(&r) != a->want) {
			mask_str(mask_of(&r), got, sizeof(got));
			mask_str(a->want, want, sizeof(want));
			print_error("%s: want %s got %s\n", a->what, want, got);
			bad++;
		}
		if (ratio > worst) {
			worst = ratio;
			worst_what = a->what;
		}
	}
	/* Many names, each bound to a literal URL and got: the literal test
	 * is made for a bounded number of names, then every get counts. */
	{
		size_t n = 0;

		for (unsigned k = 0; n + 64 < MIB; k++)
			n += (size_t)snprintf(adv + n, MIB - n,
					      "U%u = \"https://x\"\nrequests.get(U%u)\n", k, k);
		ratio = time_scan(adv, n, &r, 5) / t_ord;
		g = growth(adv, n, &r);
		printf("  names bound to literal URLs: ratio %.2f, growth %.2f\n", ratio, g);
		if (g > worst_growth) {
			worst_growth = g;
			worst_growth_what = "names bound to literal URLs";
		}
		if (mask_of(&r) != DO) {
			print_error("names bound to literal URLs: want data-out\n");
			bad++;
		}
		if (ratio > worst) {
			worst = ratio;
			worst_what = "names bound to literal URLs";
		}
	}
	printf("  worst adversarial/ordinary time ratio: %.2f (%s)\n", worst, worst_what);
	free(ord);
	free(adv);
	assert_int_equal(bad, 0);
	printf("  worst growth, 1 MiB / 256 KiB: %.2f (%s)\n", worst_growth, worst_growth_what);
	assert_true(worst < 10.0);
	assert_true(worst_growth < 8.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spec_table),
		cmocka_unit_test(test_fs_destroy),
		cmocka_unit_test(test_shell_spawn),
		cmocka_unit_test(test_raw_socket),
		cmocka_unit_test(test_dynamic_eval),
		cmocka_unit_test(test_fs_write),
		cmocka_unit_test(test_fs_write_own_places),
		cmocka_unit_test(test_data_out),
		cmocka_unit_test(test_secret_read),
		cmocka_unit_test(test_code_view),
		cmocka_unit_test(test_data_out_names),
		cmocka_unit_test(test_spans),
		cmocka_unit_test(test_size_limit),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_print),
		cmocka_unit_test(test_linear_time),
		cmocka_unit_test(test_declared_encoding),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
