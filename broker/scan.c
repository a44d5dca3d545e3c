/* SPDX-License-Identifier: MIT
 * The execute_code pre-screen (see docs: "What the grant still re-prompts
 * for").  Seven labels, each a short list of PCRE2 patterns matched once
 * over the snippet's bytes.  This is a denylist over Python source text:
 * it reads the program, it does not analyse it, and every label says in
 * the table below what it deliberately lets through.
 *
 * Linear time.  Every quantifier is possessive, so no pattern gives back
 * text it has consumed, and lookarounds read a bounded stretch (at most one
 * string literal or one dotted name).  Bracketed call arguments are walked
 * to a fixed depth (six) by nested possessive groups rather than by
 * recursion, so one start position costs at most the length of its call
 * and, because two calls' walks can only share text at different bracket
 * depths, each byte is walked at most six times per rule.  Import lists
 * are walked to the end of their statement.  The PCRE2 limits are a
 * backstop, not the mechanism: a snippet that reaches one is counted as
 * matching (fail closed).
 *
 * Matching is byte-wise (no UTF mode): the patterns are ASCII, invalid
 * UTF-8 cannot make a match fail, and \w \s \b are the ASCII classes.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "broker/scan.h"

/*
 * Backstops (see above).  The match limit counts per start position; the
 * longest legitimate walk is one call's arguments, which over a whole
 * 1 MiB snippet costs about 3M (JIT) or 5M (interpreter), so 20M lets
 * calls of a few MiB through before failing closed.  Depth and heap bind
 * the interpreter only: the deepest pattern needs a depth of about 20 and
 * 8 KiB.  JIT code fits the default 32 KiB stack; 1 MiB is headroom.
 * (Measured with tests/unit/test_scan.c against lowered limits.)
 */
#define MATCH_LIMIT 20000000u
#define DEPTH_LIMIT 200u
#define HEAP_LIMIT_KIB 1024u
#define JIT_STACK_START (32u * 1024u)
#define JIT_STACK_MAX (1024u * 1024u)

/* ---- building blocks ---------------------------------------------------- */

/*
 * Each label is a short list of patterns, and every match of a pattern
 * begins with the same literal character (its "first code unit"): PCRE2
 * then skips through the text to that character with memchr instead of
 * trying every position, which is most of a scan's speed.  The label's
 * hit is the earliest match of any of its patterns.
 */

/* Between the parts of a dotted name: spaces, newlines (legal inside
 * brackets) and backslash line continuations. */
#define WS "[\\s\\\\]*+"
#define DOT WS "\\." WS
/* The opening parenthesis of a call and any space after it. */
#define CALL WS "\\(" WS
/* Space inside an import statement: blanks and backslash continuations
 * (a bare newline too: after `import`, `from` or a comma it would be a
 * syntax error anyway).  SPS for any, SPP for at least one; a plain class
 * run, which PCRE2 steps through faster than a group. */
#define SPS "[ \\t\\\\\\r\\n]*+"
#define SPP "[ \\t\\\\\\r\\n]++"
/* A bare name, `eval(` but not `model.eval(` or `retval(`. */
#define BARE "(?<![\\w.])"

/*
 * Balanced brackets, six levels deep.  (, [ and { are treated alike: a
 * mismatched pair is accepted, which costs nothing here and keeps the
 * pattern size linear in the depth.  Brackets inside string literals are
 * not told apart from code: see "lets through" on fs-write.
 */
#define BOPEN "[(\\[{]"
#define BCLOSE "[)\\]}]"
#define PLAIN "[^()\\[\\]{}]"
#define BAL(in) "(?:" PLAIN "++|" BOPEN in BCLOSE ")*+"
#define BAL0 PLAIN "*+"
#define BAL1 BAL(BAL0)
#define BAL2 BAL(BAL1)
#define BAL3 BAL(BAL2)
#define BAL4 BAL(BAL3)
#define BAL5 BAL(BAL4)
#define BAL6 BAL(BAL5)
/* One argument at the top level of a call: it stops at a depth-0 comma. */
#define ARG "(?:[^()\\[\\]{},]++|" BOPEN BAL5 BCLOSE ")*+"
/* A call's arguments nesting deeper than BAL6 can read: a seventh open. */
#define DEEP BAL6 BOPEN BAL5 BOPEN BAL4 BOPEN BAL3 BOPEN BAL2 BOPEN BAL1 BOPEN BAL0 BOPEN
/* `name=` keyword argument (not `==`). */
#define KW "\\w++" WS "=(?!=)"

/* A plain one-line string literal without escapes; never an f-string. */
#define PFX "[rRuUbB]{0,2}"
#define LIT PFX "(?:\"[^\"\\\\\\n]*+\"|'[^'\\\\\\n]*+')"
/* open() modes: only r, b, t, U is reading; w, a, x or + is writing. */
#define READLIT PFX "(?:\"[rbtU]*+\"|'[rbtU]*+')"
#define WRITELIT PFX "(?:\"[rbtU]*+[wax+][^\"\\n]{0,10}+\"|'[rbtU]*+[wax+][^'\\n]{0,10}+')"
/* An HTTP method given first, as in request("GET", url). */
#define METHODLIT "[\"'][A-Za-z]{3,7}[\"']"

/*
 * After `\bfrom`: ` mod import ..., name, ...` (or the parenthesised form,
 * with comments) where an imported name matches names; the plain form
 * also catches `import *`.  Earlier names are stepped over one at a time
 * and each must be followed by a comma, so the walk ends with the
 * statement.
 */
#define PWS "(?:\\s++|#[^\\n]*+)*+"
#define IMPORT_LIST(mod, names)                                                          \
	SPP "(?:" mod ")" SPP "import(?:" SPS "\\(" PWS "(?:(?!(?:" names ")\\b)\\w++" \
	"(?:\\s++as\\s++\\w++)?+" PWS "," PWS ")*+(?:" names ")\\b"                        \
	"|" SPP "(?:(?!(?:" names ")\\b)\\w++(?:" SPP "as" SPP "\\w++)?+" SPS "," SPS    \
	")*+(?:(?:" names ")\\b|\\*))"
/* After `\bimport`: ` a, mod as m`, the module under another name. */
#define IMPORT_AS(mods)                                                                  \
	SPP "(?:(?!(?:" mods ")" SPP "as\\b)[\\w.]++(?:" SPP "as" SPP "\\w++)?+" SPS  \
	"," SPS ")*+(?:" mods ")" SPP "as\\b"
/*
 * A name used as a value (`m = os`, `f(x, os)`, `[os]`), not as `os.x`:
 * after = ( [ : { or a comma and at most two blanks, before a closing
 * bracket, , ; : # or the line's end.  first is the name's first
 * character, checked again by the lookbehind so the pattern still starts
 * with it; a comma is only accepted before a bracket, so that
 * `import sys, os` stays a plain import.
 */
#define VALUE(first, rest)                                                                \
	first "(?:(?<=[=(\\[:{]" first "|[=(\\[:{][ \\t]" first "|[=(\\[:{][ \\t]{2}" first  \
	")(?:" rest ")[ \\t]*+(?:[)\\]},;:#\\r\\n]|$)|(?<=," first "|,[ \\t]" first ")(?:"   \
	rest ")[ \\t]*+[)\\]}])"

/* fs-write: after open( whose second argument is the mode. */
#define OPEN_MODE                                                                        \
	"(?:" ARG "," WS "(?!" KW "|\\)|" READLIT WS "[,)])"                             \
	"|(?:(?!mode" WS "=|\\*)" ARG "," WS ")*+(?:mode" WS "=(?!=)" WS "(?!" READLIT WS  \
	"[,)])|\\*)"                                                                     \
	"|" DEEP ")"
/* fs-write: after os.open(, a write flag or no O_RDONLY at depth 0. */
#define OS_OPEN_FLAGS                                                                    \
	"(?:(?:[^()\\[\\]{}O]++|O(?!_(?:WRONLY|RDWR|CREAT|APPEND|TRUNC)\\b)|" BOPEN BAL5  \
	BCLOSE ")*+O_(?:WRONLY|RDWR|CREAT|APPEND|TRUNC)\\b"                              \
	"|(?:[^()\\[\\]{}O]++|O(?!_RDONLY\\b)|" BOPEN BAL5 BCLOSE ")*+\\))"

/* data-out: keyword arguments that carry a request body or query. */
#define PAYLOAD "(?:params|data|json|files|content)" WS "=(?!=)"
/* data-out: after get( etc.: the URL is not one plain literal. */
#define BUILT_URL "(?:url" WS "=" WS ")?(?!" LIT WS "[,)]|\\))"
/* data-out: a method literal that sends. */
#define SENDS PFX "[\"'](?i:post|put|patch)[\"']"
/* data-out: after an HTTP client's name (requests, session...). */
#define CLIENT_USE                                                                       \
	"\\b" DOT "(?:(?:put|patch)" CALL "|(?:get|head|delete|options)" CALL "(?:"        \
	BUILT_URL "|(?:(?!" PAYLOAD ")" ARG "," WS ")*+" PAYLOAD "))"
/* data-out: after get(: an http URL as an f-string, or a literal then + % .format */
#define HTTP_BUILT                                                                       \
	"(?:(?:[fF][rR]?|[rR][fF])[\"'](?:https?|wss?|ftp)://"                           \
	"|[\"'](?:https?|wss?|ftp)://[^\"'\\n]*+[\"']" WS "(?:[+%]|\\." WS "format\\b))"
/* data-out: after request( / stream( / fetch(. */
#define REQUEST_ARGS "(?:" SENDS "|" METHODLIT WS "," WS BUILT_URL ")"
/* data-out: after urlopen(: a sending method, a built URL (a Request of a
 * literal is checked as a Request), positional data or data=. */
#define URLOPEN_ARGS                                                                     \
	"(?:" SENDS "|(?!" LIT WS "[,)]|(?:\\w++" DOT ")*+Request" CALL LIT WS "[,)]|\\))" \
	"|" ARG "," WS "(?!" KW "|\\))"                                                  \
	"|(?:(?!data" WS "=(?!=))" ARG "," WS ")*+data" WS "=(?!=)" WS "(?!None\\b))"
/* data-out: after Request(: a sending method, a body, positional data or a
 * built URL (unless the first argument is a method: requests.Request). */
#define REQUEST_OBJ_ARGS                                                                 \
	"(?:" SENDS "|(?:(?!" PAYLOAD ")" ARG "," WS ")*+" PAYLOAD                          \
	"|(?!" METHODLIT WS ",)(?:" ARG "," WS "(?!" KW "|\\))|" BUILT_URL "))"
/* secret-read: a system file under /etc or /proc, after one separator. */
#define SYS_SECRET(sep)                                                                  \
	sep "(?:etc[/\\\\]++(?:shadow|gshadow|passwd|sudoers)\\b"                          \
	"|proc[/\\\\]++[^\\s\"'/\\\\]{1,32}+[/\\\\]++environ\\b)"

/* ---- the table ---------------------------------------------------------- */

#define MAX_PATTERNS 24

struct label_def {
	const char *name;
	const char *summary;
	const char *const *patterns;	/* NULL-terminated */
};

#define PATTERNS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static const struct label_def defs[SCAN_LABEL_COUNT] = {
	/*
	 * fs-destroy.  Catches shutil.rmtree, os.remove/unlink/rmdir/
	 * removedirs (also as `x.os.remove`), any `.unlink(`/`.rmdir(` call
	 * (pathlib), their from-imports (so a later bare `rmtree(p)` is
	 * covered), `from shutil import *`, and shutil imported or assigned
	 * under another name.  Lets through: names reached by getattr or
	 * strings, a bound method taken without calling it (`f = p.unlink`),
	 * and os under an alias (that is shell-spawn's catch).
	 */
	[SCAN_FS_DESTROY] = {
		"fs-destroy", "deletes files", PATTERNS(
		"\\bshutil" DOT "rmtree\\b|\\b" VALUE("s", "hutil"),
		"\\bos" DOT "(?:remove|unlink|rmdir|removedirs)\\b",
		"\\bfrom(?:" IMPORT_LIST("os", "remove|unlink|rmdir|removedirs")
		"|" IMPORT_LIST("shutil", "rmtree") ")",
		"\\bimport" IMPORT_AS("shutil"),
		"\\." WS "(?:unlink|rmdir)" CALL)
	},
	/*
	 * shell-spawn.  Catches os.system, popen, startfile, exec*, spawn*,
	 * posix_spawn*; any attribute of subprocess (subprocess.run, .PIPE:
	 * the use, not the import, so a bare `import subprocess` passes);
	 * pty.spawn; asyncio's (create_)subprocess_exec/shell; any mention of
	 * ctypes, _ctypes, cffi or importlib; the from-imports of those os
	 * names or `from os import *`; any `from subprocess import`; `import
	 * os as o` / `import subprocess as sp` (os is matched by name, so an
	 * alias would hide every spelling under it); os or subprocess used as
	 * a value (`m = os`); getattr/vars on them; os.__dict__; sys.modules.
	 * Lets through: names built from strings elsewhere, os reached through
	 * another module under another name, multiprocessing (it starts Python,
	 * not other programs).
	 */
	[SCAN_SHELL_SPAWN] = {
		"shell-spawn", "starts other programs", PATTERNS(
		"\\bos" DOT "(?:system|popen|startfile|exec\\w*+|spawn\\w*+|posix_spawn\\w*+"
		"|__dict__)\\b|\\b" VALUE("o", "s"),
		"\\bsubprocess(?:" DOT "\\w|_(?:exec|shell)\\b)|\\b" VALUE("s", "ubprocess"),
		"\\bctypes\\b",
		"\\bcffi\\b",
		"\\bcreate_subprocess_(?:exec|shell)\\b",
		"\\b_ctypes\\b",
		"\\bpty" DOT "spawn\\b",
		"\\bimport(?:lib\\b|" IMPORT_AS("os|subprocess") ")",
		"\\bfrom(?:" IMPORT_LIST("os", "system|popen|startfile|exec\\w*+|spawn\\w*+"
					 "|posix_spawn\\w*+")
		"|" SPP "subprocess" SPP "import\\b"
		"|" IMPORT_LIST("pty", "spawn") ")",
		"\\bgetattr" CALL "(?:os|subprocess|pty)\\b",
		"\\bvars" CALL "(?:os|subprocess|pty)\\b",
		"\\bsys" DOT "modules\\b")
	},
	/*
	 * raw-socket.  Catches socket.socket/create_connection/create_server,
	 * the _socket module, their from-imports and asyncio's open_connection/
	 * start_server, socket imported under another name, a `.connect((`,
	 * `.connect_ex((` or `.bind((` call with a tuple address, and
	 * .open_connection/.start_server/.create_connection/
	 * .create_datagram_endpoint calls (asyncio, event loops).  Lets
	 * through: a socket obtained some other way whose address is a
	 * variable (`s.connect(addr)`), the socket module assigned to a
	 * variable.
	 */
	[SCAN_RAW_SOCKET] = {
		"raw-socket", "opens a raw network socket", PATTERNS(
		"\\bsocket" DOT "(?:socket|create_connection|create_server)\\b",
		"\\b_socket\\b",
		"\\bfrom(?:" IMPORT_LIST("socket", "socket|create_connection|create_server")
		"|" IMPORT_LIST("asyncio", "open_connection|start_server") ")",
		"\\bimport" IMPORT_AS("socket"),
		"\\." WS "(?:(?:connect|connect_ex|bind)" CALL "\\("
		"|(?:open_connection|start_server|create_connection|create_datagram_endpoint)"
		CALL ")")
	},
	/*
	 * dynamic-eval.  Catches eval(, exec(, __import__( and compile( as
	 * bare names (compile is included: its code object runs without
	 * eval); `x.eval(` and `re.compile(` are methods and pass.  Also the
	 * builtins./__builtins__. spellings, __builtins__[...], getattr on
	 * builtins, their from-imports, eval/exec/compile/__import__ used as a
	 * value (`map(eval, xs)`), runpy, pickle/marshal/dill loads (a pickle
	 * can name os.system without spelling it), types.FunctionType/
	 * CodeType.  Lets through: code reached by names built at run time
	 * (getattr(mod, "ev" + "al")), other deserialisers that can run code
	 * (yaml.load with an unsafe loader, jsonpickle).  A bare compile(
	 * imported from re is flagged, not let through.
	 */
	[SCAN_DYNAMIC_EVAL] = {
		"dynamic-eval", "evaluates code built at run time", PATTERNS(
		BARE "e(?:val|xec)" CALL "|\\b" VALUE("e", "val|xec"),
		BARE "compile" CALL "|\\b" VALUE("c", "ompile"),
		BARE "__import__" CALL "|\\b" VALUE("_", "_import__")
		"|\\b__builtins__(?:" DOT "(?:eval|exec|compile|__import__)\\b|" WS "\\["
		")",
		"pickle" DOT "(?:loads?|Unpickler)\\b",
		"\\bcPickle" DOT "(?:loads?|Unpickler)\\b",
		"\\bbuiltins" DOT "(?:eval|exec|compile|__import__)\\b",
		"\\bgetattr" CALL "(?:builtins|__builtins__)\\b",
		"\\bfrom" IMPORT_LIST("builtins", "eval|exec|compile|__import__"),
		"\\brunpy\\b",
		"\\bdill" DOT "(?:loads?|Unpickler)\\b",
		"\\bmarshal" DOT "loads?\\b",
		"\\btypes" DOT "(?:FunctionType|CodeType|LambdaType)\\b")
	},
	/*
	 * fs-write.  Catches open(...) (builtin, or io/codecs/gzip/bz2/lzma/
	 * tarfile/aiofiles .open) whose second positional argument is anything
	 * but a read-mode literal ("r", "rb", 'rt'...: a variable mode is
	 * flagged), whose mode= is anything but a read literal, or that takes
	 * *args; the arguments are read across balanced brackets, so the path
	 * may be a nested call, and a call nested deeper than six brackets is
	 * flagged unread.  Any other `.open(`/`.fdopen(` (Path.open, zipfile)
	 * with a write-mode literal; os.open with a write flag or without
	 * O_RDONLY; .write_text/.write_bytes/.touch/.symlink_to/.hardlink_to/
	 * .chmod calls; os.rename/renames/replace/chmod/chown/truncate/link/
	 * symlink/utime/mkdir/makedirs/mkfifo/mknod; shutil.copy*, move, chown,
	 * make_archive, unpack_archive; their from-imports; open used as a
	 * value (`f = open`).  Lets through: a bracket or comma inside a
	 * string literal in open()'s arguments (`open("a)b", "w")` is read as
	 * closing at the first ")"; a comma errs the other way and flags), a
	 * `#` comment holding brackets inside the call, an `.open(` of another
	 * library given a variable mode, writes through an fd from elsewhere
	 * (os.write on a pipe), and library functions that write to a path
	 * they are given (DataFrame.to_csv, numpy.save, savefig, sqlite3).
	 */
	[SCAN_FS_WRITE] = {
		"fs-write", "writes files", PATTERNS(
		"open(?:(?<![\\w.]open)|(?<=\\bio\\.open|\\bcodecs\\.open|\\bgzip\\.open"
		"|\\bbz2\\.open|\\blzma\\.open|\\btarfile\\.open|\\baiofiles\\.open))"
		CALL OPEN_MODE "|\\b" VALUE("o", "pen"),
		"\\bos" DOT "(?:open" CALL OS_OPEN_FLAGS
		"|(?:renames?|replace|l?chmod|l?chown|truncate|link|symlink|utime|mkdir"
		"|makedirs|mkfifo|mknod)\\b)",
		"\\bshutil" DOT "(?:copy\\w*+|move|chown|make_archive|unpack_archive)\\b",
		"\\bfrom(?:" IMPORT_LIST("os", "renames?|replace|l?chmod|l?chown|truncate|link"
					 "|symlink|utime|mkdir|makedirs|mkfifo|mknod")
		"|" IMPORT_LIST("shutil", "copy\\w*+|move|chown|make_archive|unpack_archive") ")",
		"\\." WS "(?:(?:open|fdopen)" CALL "(?:(?!(?:mode" WS "=" WS ")?" WRITELIT WS "[,)])"
		ARG "," WS ")*+(?:mode" WS "=" WS ")?" WRITELIT WS "[,)]"
		"|(?:write_text|write_bytes|touch|symlink_to|hardlink_to|l?chmod)" CALL ")")
	},
	/*
	 * data-out.  Catches `.post(` on anything; put/patch on an HTTP client
	 * by name (a word ending requests, http, httpx, urllib3, session, sess
	 * or client); method="POST"/PUT/PATCH, or such a method given first to
	 * request/urlopen/stream/fetch/Request; a get/head/delete/options on
	 * a client whose URL is not one plain string literal (f-string, +, %,
	 * .format, a variable) or that carries params/data/json/files/content;
	 * request("GET", url) with such a URL; on any object, a get whose URL
	 * is an http f-string or a concatenated http literal; urlopen with a
	 * built URL, positional data or data=; Request with a built URL or a
	 * body; smtplib, ftplib, paramiko, telnetlib, xmlrpc, websocket(s),
	 * pysftp, asyncssh; from-imports of post/put/patch; HTTP modules
	 * imported under another name.  Lets through, by design: a get of one
	 * literal URL (requests.get("https://example.com")) and its headers/
	 * cookies.  Also lets through: put/patch on a client whose variable
	 * is named otherwise, and other network libraries.
	 */
	[SCAN_DATA_OUT] = {
		"data-out", "sends data out over the network", PATTERNS(
		"requests" CLIENT_USE "|" BARE "request" CALL REQUEST_ARGS,
		"httpx?" CLIENT_USE,
		"sess(?:ion)?" CLIENT_USE,
		BARE "stream" CALL REQUEST_ARGS,
		"\\bsmtplib\\b",
		"client" CLIENT_USE,
		"urllib3" CLIENT_USE "|" BARE "urlopen" CALL URLOPEN_ARGS,
		"\\bmethod" WS "=" WS SENDS,
		"\\bRequest" CALL REQUEST_OBJ_ARGS,
		BARE "fetch" CALL REQUEST_ARGS,
		"\\bftplib\\b",
		"\\bfrom" IMPORT_LIST("requests|httpx", "post|put|patch"),
		BARE "get" CALL HTTP_BUILT,
		"\\bp(?:aramiko|ysftp)\\b",
		"\\btelnetlib\\b",
		"\\bxmlrpc\\b",
		"\\bwebsockets?\\b",
		"\\basyncssh\\b",
		"\\bimport" IMPORT_AS("requests|httpx|aiohttp|urllib3|urllib\\.request"),
		"\\." WS "(?:post" CALL
		"|(?:request|stream|fetch)" CALL REQUEST_ARGS
		"|urlopen" CALL URLOPEN_ARGS
		"|(?:get|head|delete|options)" CALL HTTP_BUILT ")")
	},
	/*
	 * secret-read.  Catches .ssh, .aws (so .aws/credentials and
	 * .aws\\credentials alike), .gnupg, .netrc, .pgpass, .git-credentials,
	 * .keystore_key, .docker/config.json, .kube/config, id_rsa/id_dsa/
	 * id_ecdsa/id_ed25519, /etc/shadow|gshadow|passwd|sudoers and
	 * /proc/<pid>/environ with either separator, netrc.netrc, any mention
	 * of dotenv (load_dotenv reads .env unnamed), keyring.get_password,
	 * and .env as a file name: after a quote, separator, space or
	 * ~ ( , = + : }, and not followed by a name character, so os.environ,
	 * self.env and .environment pass.  Lets through: paths assembled from
	 * pieces (".s" + "sh"), `.env` after a format directive ("%s.env"),
	 * and every other file the account can read: that is the grant's
	 * honest statement.
	 */
	[SCAN_SECRET_READ] = {
		"secret-read", "reads secrets such as keys or credentials", PATTERNS(
		"\\.(?:(?:ssh|aws|gnupg|netrc|pgpass|git-credentials|keystore_key)\\b"
		"|(?:docker[/\\\\]++config\\.json|kube[/\\\\]++config)\\b"
		"|(?<![^\\s\"'/\\\\~(,=+:}]\\.)env(?![\\w-]))",
		"\\bid_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?\\b",
		"\\bnetrc" DOT "netrc\\b",
		"dotenv",
		"\\bkeyring" DOT "get_(?:password|credential)\\b",
		SYS_SECRET("/"),
		SYS_SECRET("\\\\"))
	},
};

/* ---- compile ------------------------------------------------------------ */

static pcre2_code *codes[SCAN_LABEL_COUNT][MAX_PATTERNS];
static bool ready;

void scan_fini(void)
{
	for (size_t l = 0; l < SCAN_LABEL_COUNT; l++) {
		for (size_t k = 0; k < MAX_PATTERNS; k++) {
			pcre2_code_free(codes[l][k]);
			codes[l][k] = NULL;
		}
	}
	ready = false;
}

static int compile_one(size_t l, size_t k, char *err, size_t errlen)
{
	PCRE2_UCHAR msg[160];
	PCRE2_SIZE off;
	int ec;

	codes[l][k] = pcre2_compile((PCRE2_SPTR)defs[l].patterns[k], PCRE2_ZERO_TERMINATED,
				    PCRE2_NEVER_UTF | PCRE2_NEVER_UCP | PCRE2_NEVER_BACKSLASH_C,
				    &ec, &off, NULL);
	if (!codes[l][k]) {
		pcre2_get_error_message(ec, msg, sizeof(msg));
		if (err && errlen)
			snprintf(err, errlen, "scan: %s pattern %zu at offset %zu: %s",
				 defs[l].name, k + 1, (size_t)off, (const char *)msg);
		return -1;
	}
	/* JIT is an optimisation: without it (no JIT support, or executable
	 * memory refused) pcre2_match() interprets the same pattern. */
	(void)pcre2_jit_compile(codes[l][k], PCRE2_JIT_COMPLETE);
	return 0;
}

int scan_init(char *err, size_t errlen)
{
	if (ready)
		return 0;
	for (size_t l = 0; l < SCAN_LABEL_COUNT; l++) {
		for (size_t k = 0; defs[l].patterns[k]; k++) {
			if (k == MAX_PATTERNS) {
				if (err && errlen)
					snprintf(err, errlen, "scan: %s has over %d patterns",
						 defs[l].name, MAX_PATTERNS);
				scan_fini();
				return -1;
			}
			if (compile_one(l, k, err, errlen) < 0) {
				scan_fini();
				return -1;
			}
		}
	}
	ready = true;
	return 0;
}

/* ---- match -------------------------------------------------------------- */

/* What one scan needs besides the patterns, per call so scans may run
 * in parallel (a JIT stack must not be shared between threads). */
struct scan_ctx {
	pcre2_match_context *mctx;
	pcre2_jit_stack *jstack;
	pcre2_match_data *md;
};

static void ctx_free(struct scan_ctx *c)
{
	pcre2_match_data_free(c->md);
	pcre2_jit_stack_free(c->jstack);
	pcre2_match_context_free(c->mctx);
}

static int ctx_init(struct scan_ctx *c)
{
	memset(c, 0, sizeof(*c));
	c->mctx = pcre2_match_context_create(NULL);
	c->md = pcre2_match_data_create(1, NULL);
	if (!c->mctx || !c->md) {
		ctx_free(c);
		return -ENOMEM;
	}
	pcre2_set_match_limit(c->mctx, MATCH_LIMIT);
	pcre2_set_depth_limit(c->mctx, DEPTH_LIMIT);
	pcre2_set_heap_limit(c->mctx, HEAP_LIMIT_KIB);
	/* Without a stack of its own JIT code gets 32 KiB of machine stack;
	 * if the mmap fails that default is still a bounded, working stack. */
	c->jstack = pcre2_jit_stack_create(JIT_STACK_START, JIT_STACK_MAX, NULL);
	if (c->jstack)
		pcre2_jit_stack_assign(c->mctx, NULL, c->jstack);
	return 0;
}

static unsigned line_of(const char *code, size_t off)
{
	unsigned line = 1;
	const char *p = code, *end = code + off, *nl;

	while (p < end && (nl = memchr(p, '\n', (size_t)(end - p)))) {
		line++;
		p = nl + 1;
	}
	return line;
}

/* A resource limit means "could not finish reading": count it as a match. */
static bool is_limit(int rc)
{
	return rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
	       rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT ||
	       rc == PCRE2_ERROR_NOMEMORY;
}

/*
 * One label: the earliest match over its patterns.  A pattern that hit a
 * limit marks the label limited unless another found a real match, whose
 * place is then the better thing to show.
 */
static int match_label(struct scan_ctx *c, enum scan_label l, const char *code, size_t len,
		       struct scan_result *out)
{
	struct scan_hit h = { .label = l };
	bool found = false, limited = false;

	for (size_t k = 0; k < MAX_PATTERNS && codes[l][k]; k++) {
		int rc = pcre2_match(codes[l][k], (PCRE2_SPTR)code, len, 0, 0, c->md, c->mctx);
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);

		if (rc == PCRE2_ERROR_NOMATCH)
			continue;
		if (is_limit(rc)) {
			limited = true;
			continue;
		}
		if (rc < 0)
			return -EIO;
		if (!found || ov[0] < h.start) {
			h.start = ov[0];
			h.end = ov[1];
			found = true;
		}
	}
	if (found) {
		h.line = line_of(code, h.start);
	} else if (limited) {
		/* No position is known: point at the whole snippet. */
		h = (struct scan_hit){ .label = l, .start = 0, .end = len, .line = 1,
				       .limited = true };
	} else {
		return 0;
	}
	out->hits[out->n++] = h;
	return 0;
}

int scan_snippet(const char *code, size_t len, size_t max_len, struct scan_result *out)
{
	struct scan_ctx c;
	int rc = 0;

	if (!out)
		return -EINVAL;
	out->n = 0;
	if (!code && len)
		return -EINVAL;
	if (len > max_len)
		return -E2BIG;
	if (!ready && scan_init(NULL, 0) < 0)
		return -EIO;
	if (!code)
		code = "";	/* PCRE2 10.42 wants a subject pointer even for "" */
	if ((rc = ctx_init(&c)) < 0)
		return rc;
	for (int l = 0; l < SCAN_LABEL_COUNT && rc == 0; l++)
		rc = match_label(&c, (enum scan_label)l, code, len, out);
	ctx_free(&c);
	if (rc < 0)
		out->n = 0;
	return rc;
}

const char *scan_label_name(enum scan_label l)
{
	return (unsigned)l < SCAN_LABEL_COUNT ? defs[l].name : "unknown";
}

const char *scan_label_summary(enum scan_label l)
{
	return (unsigned)l < SCAN_LABEL_COUNT ? defs[l].summary : "does something unknown";
}

/* ---- report ------------------------------------------------------------- */

#define SHOW_MAX 72	/* bytes of matched text shown per line */

/* Length of a well-formed UTF-8 sequence at p that is safe to show on a
 * terminal (not a C1 control, bidi override or line separator), else 0. */
static size_t safe_utf8(const unsigned char *p, size_t n)
{
	size_t k = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
	uint32_t cp;

	if (!k || k > n || p[0] > 0xf4)
		return 0;
	cp = p[0] & (0x7fu >> k);
	for (size_t i = 1; i < k; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp <= 0x9f ||
	    (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069))
		return 0;
	return k;
}

/* The matched text on one line: whitespace runs become one space, other
 * control bytes are escaped, so a snippet cannot drive the terminal. */
static void put_text(FILE *out, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, shown = 0, k;
	bool space = false;

	while (i < n && shown < SHOW_MAX) {
		if (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
			space = true;
			i++;
			continue;
		}
		if (space && shown) {
			fputc(' ', out);
			shown++;
		}
		space = false;
		if (p[i] >= 0x20 && p[i] < 0x7f) {
			fputc(p[i], out);
			shown++;
			i++;
		} else if (p[i] >= 0x80 && (k = safe_utf8(p + i, n - i))) {
			fwrite(p + i, 1, k, out);
			shown += k;
			i += k;
		} else {
			fprintf(out, "\\x%02x", p[i]);
			shown += 4;
			i++;
		}
	}
	if (i < n)
		fputs("...", out);
}

void scan_print(FILE *out, const char *code, size_t len, const struct scan_result *r)
{
	if (!r || r->n == 0) {
		fputs("no labels\n", out);
		return;
	}
	for (size_t i = 0; i < r->n; i++) {
		const struct scan_hit *h = &r->hits[i];

		fprintf(out, "%s  line %u  bytes %zu-%zu  ", scan_label_name(h->label), h->line,
			h->start, h->end);
		if (h->limited)
			fputs("(scan limit reached: counted as a match)", out);
		else if (code && h->end <= len && h->start <= h->end)
			put_text(out, code + h->start, h->end - h->start);
		fputc('\n', out);
	}
}
