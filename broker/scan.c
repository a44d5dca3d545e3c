/* SPDX-License-Identifier: MIT
 * The execute_code pre-screen (see docs: "What the grant still re-prompts
 * for").  Seven labels, each one PCRE2 pattern matched once over the
 * snippet's bytes.  This is a denylist over Python source text: it reads
 * the program, it does not analyse it, and every pattern says below what
 * it deliberately lets through.
 *
 * Linear time.  Every quantifier is possessive and every alternation's
 * branches start with different characters, so no pattern gives back text
 * it has consumed.  Bracketed call arguments are walked to a fixed depth
 * (BAL_DEPTH) by nested possessive groups rather than by recursion, so one
 * start position costs at most the length of its call and, because two
 * calls' walks can only share text at different bracket depths, each byte
 * is walked at most BAL_DEPTH times per rule.  The PCRE2 match and depth
 * limits are a backstop, not the mechanism: a snippet that reaches one is
 * counted as matching (fail closed).
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
 * Backstops (see the header comment).  The match limit counts per start
 * position; the longest legitimate walk is one call's arguments, so it is
 * set well above what a whole 1 MiB argument list costs, which is measured
 * in tests/unit/test_scan.c.  Depth and heap apply to the interpreter only
 * (no JIT): the deepest legitimate nesting is BAL_DEPTH brackets plus the
 * groups around them.
 */
#define MATCH_LIMIT 20000000u
#define DEPTH_LIMIT 2000u
#define HEAP_LIMIT_KIB (64u * 1024u)
#define JIT_STACK_START (32u * 1024u)
#define JIT_STACK_MAX (1024u * 1024u)

/* ---- building blocks ---------------------------------------------------- */

/* Between the parts of a dotted name: spaces, newlines (legal inside
 * brackets) and backslash line continuations. */
#define WS "[\\s\\\\]*+"
#define DOT WS "\\." WS
/* The opening parenthesis of a call and any space after it. */
#define CALL WS "\\(" WS
/* Space inside one logical line, e.g. of an import statement. */
#define SP "(?:[ \\t]|\\\\\\r?\\n)"
/* A name that is not an attribute: `eval(` but not `model.eval(`. */
#define BARE "(?<![\\w.])"
/* A method of anything, or the bare name after a from-import. */
#define METHOD_OR_BARE "(?:\\." WS "|" BARE ")"

/*
 * Balanced brackets, BAL_DEPTH (6) levels deep.  (, [ and { are treated
 * alike: a mismatched pair is accepted, which costs nothing here, and it
 * keeps the pattern size linear in the depth.  Brackets inside string
 * literals are not told apart from code: see "lets through" on fs-write.
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
 * `from mod import ..., name, ...` (or the parenthesised form, with
 * comments) where one imported name matches names; the plain form also
 * catches `import *`.  Earlier names are stepped over one at a time and
 * each must be followed by a comma, so the walk ends with the statement.
 */
#define FROM(mod) "\\bfrom" SP "++(?:" mod ")" SP "++import"
#define PWS "(?:\\s++|#[^\\n]*+)*+"
#define IMPORTS(mod, names)                                                               \
	"(?:" FROM(mod) SP "*+\\(" PWS "(?:(?!(?:" names ")\\b)\\w++(?:\\s++as\\s++\\w++)?+" \
	PWS "," PWS ")*+(?:" names ")\\b"                                                  \
	"|" FROM(mod) SP "++(?:(?!(?:" names ")\\b)\\w++(?:" SP "++as" SP "++\\w++)?+" SP   \
	"*+," SP "*+)*+(?:(?:" names ")\\b|\\*))"
/* `import a, mod as m`: the module under another name. */
#define IMPORT_AS(mods)                                                                  \
	"\\bimport" SP "++(?:(?!(?:" mods ")" SP "++as\\b)[\\w.]++(?:" SP "++as" SP      \
	"++\\w++)?+" SP "*+," SP "*+)*+(?:" mods ")" SP "++as\\b"
/* The name used as a value (`m = os`, `f(os)`, `[os]`), not as `os.x`. */
#define VALUE(names)                                                                     \
	"[=(\\[:{][ \\t]*+(?:" names ")[ \\t]*+(?:[)\\]},;:#\\r\\n]|$)"                  \
	"|,[ \\t]*+(?:" names ")[ \\t]*+[)\\]}]"

/* builtin open() and the modules whose open() takes (path, mode). */
#define OPENFN "(?:" BARE "|\\b(?:io|codecs|gzip|bz2|lzma|tarfile|aiofiles)" DOT ")open" CALL
/* HTTP client objects by name: the module, or a variable ending so. */
#define CLIENT "(?:requests|httpx|aiohttp|urllib3|http|(?i:session|client))\\b"
/* Keyword arguments that carry a request body or query. */
#define PAYLOAD "(?:params|data|json|files|content)" WS "=(?!=)"
#define URLOPEN METHOD_OR_BARE "urlopen" CALL

/* ---- the table ---------------------------------------------------------- */

struct label_def {
	const char *name;
	const char *summary;
	const char *pattern;
};

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
		"fs-destroy", "deletes files",
		"\\bshutil" DOT "rmtree\\b"
		"|\\bos" DOT "(?:remove|unlink|rmdir|removedirs)\\b"
		"|\\." WS "(?:unlink|rmdir)" CALL
		"|" IMPORTS("os", "remove|unlink|rmdir|removedirs")
		"|" IMPORTS("shutil", "rmtree")
		"|" IMPORT_AS("shutil")
		"|" VALUE("shutil")
	},
	/*
	 * shell-spawn.  Catches os.system, popen, startfile, exec*, spawn*,
	 * posix_spawn*, any attribute of subprocess (subprocess.run, .PIPE:
	 * the use, not the import, so a bare `import subprocess` passes),
	 * pty.spawn, asyncio's (create_)subprocess_exec/shell, any mention of
	 * ctypes, _ctypes, cffi or importlib, the from-imports of those os
	 * names or `from os import *`, any `from subprocess import`, `import
	 * os as o` / `import subprocess as sp` (os is matched by name, so an
	 * alias would hide every spelling under it), os or subprocess used as
	 * a value (`m = os`), getattr/vars on them, os.__dict__, sys.modules.
	 * Lets through: names built from strings elsewhere, os reached through
	 * another module under another name, multiprocessing (it starts Python,
	 * not other programs).
	 */
	[SCAN_SHELL_SPAWN] = {
		"shell-spawn", "starts other programs",
		"\\bos" DOT "(?:system|popen|startfile|exec\\w*+|spawn\\w*+|posix_spawn\\w*+)\\b"
		"|\\bsubprocess" DOT "\\w"
		"|\\bpty" DOT "spawn\\b"
		"|\\b(?:create_)?subprocess_(?:exec|shell)\\b"
		"|\\b(?:_?ctypes|cffi|importlib)\\b"
		"|" IMPORTS("os", "system|popen|startfile|exec\\w*+|spawn\\w*+|posix_spawn\\w*+")
		"|" FROM("subprocess") "\\b"
		"|" IMPORTS("pty", "spawn")
		"|" IMPORT_AS("os|subprocess")
		"|" VALUE("os|subprocess")
		"|\\b(?:getattr|vars)" CALL "(?:os|subprocess|pty)\\b"
		"|\\bos" DOT "__dict__"
		"|\\bsys" DOT "modules\\b"
	},
	/*
	 * raw-socket.  Catches socket.socket/create_connection/create_server,
	 * the _socket module, their from-imports, socket imported under
	 * another name, a `.connect((`, `.connect_ex((` or `.bind((` call with
	 * a tuple address, and asyncio's open_connection/start_server/
	 * create_connection/create_datagram_endpoint.  Lets through: a socket
	 * object obtained some other way whose address is a variable
	 * (`s.connect(addr)`), and the socket module assigned to a variable.
	 */
	[SCAN_RAW_SOCKET] = {
		"raw-socket", "opens a raw network socket",
		"\\bsocket" DOT "(?:socket|create_connection|create_server)\\b"
		"|\\b_socket\\b"
		"|" IMPORTS("socket", "socket|create_connection|create_server")
		"|" IMPORT_AS("socket")
		"|\\." WS "(?:connect|connect_ex|bind)" CALL "\\("
		"|" METHOD_OR_BARE "(?:open_connection|start_server|create_connection"
		"|create_datagram_endpoint)" CALL
	},
	/*
	 * dynamic-eval.  Catches eval(, exec(, __import__( and compile( as
	 * bare names (compile is included: its code object runs without
	 * eval); `x.eval(`/`re.compile(` are methods and pass.  Also
	 * builtins./__builtins__. spellings, __builtins__[...], getattr on
	 * builtins, their from-imports, eval/exec/compile/__import__ used as a
	 * value (`map(eval, xs)`), runpy, pickle/marshal/dill loads (a pickle
	 * can name os.system without spelling it), types.FunctionType/
	 * CodeType.  Lets through: a bare `compile(` imported from re is
	 * flagged, not let through; what passes is code reached by names
	 * built at run time (getattr(mod, "ev" + "al")).
	 */
	[SCAN_DYNAMIC_EVAL] = {
		"dynamic-eval", "evaluates code built at run time",
		BARE "(?:eval|exec|compile|__import__)" CALL
		"|\\b(?:builtins|__builtins__)" DOT "(?:eval|exec|compile|__import__)\\b"
		"|\\b__builtins__" WS "\\["
		"|\\b(?:getattr|vars)" CALL "(?:builtins|__builtins__)\\b"
		"|" IMPORTS("builtins", "eval|exec|compile|__import__")
		"|" VALUE("eval|exec|compile|__import__")
		"|\\brunpy\\b"
		"|\\b(?:c?[pP]ickle|_pickle|dill|cloudpickle|marshal)" DOT "(?:loads?|Unpickler)\\b"
		"|\\btypes" DOT "(?:FunctionType|CodeType|LambdaType)\\b"
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
	 * make_archive/unpack_archive, and their from-imports.  Lets through:
	 * a bracket or comma inside a string literal in open()'s arguments
	 * (`open("a)b", "w")` is read as closing at the first ")"; a comma
	 * errs the other way and flags), a `#` comment containing brackets
	 * inside the call, an `.open(` of another library given a variable
	 * mode, writes through an fd from elsewhere (os.write on a pipe).
	 */
	[SCAN_FS_WRITE] = {
		"fs-write", "writes files",
		OPENFN ARG "," WS "(?!" KW "|\\)|" READLIT WS "[,)])"
		"|" OPENFN "(?:(?!mode" WS "=|\\*)" ARG "," WS ")*+"
		"(?:mode" WS "=(?!=)" WS "(?!" READLIT WS "[,)])|\\*)"
		"|" OPENFN DEEP
		"|\\." WS "(?:open|fdopen)" CALL "(?:(?!(?:mode" WS "=" WS ")?" WRITELIT WS "[,)])"
		ARG "," WS ")*+(?:mode" WS "=" WS ")?" WRITELIT WS "[,)]"
		"|\\bos" DOT "open" CALL "(?:[^()\\[\\]{}O]++|O(?!_(?:WRONLY|RDWR|CREAT|APPEND|TRUNC)\\b)|"
		BOPEN BAL5 BCLOSE ")*+O_(?:WRONLY|RDWR|CREAT|APPEND|TRUNC)\\b"
		"|\\bos" DOT "open" CALL "(?:[^()\\[\\]{}O]++|O(?!_RDONLY\\b)|" BOPEN BAL5 BCLOSE ")*+\\)"
		"|\\." WS "(?:write_text|write_bytes|touch|symlink_to|hardlink_to|l?chmod)" CALL
		"|\\bos" DOT "(?:renames?|replace|l?chmod|l?chown|truncate|link|symlink|utime"
		"|mkdir|makedirs|mkfifo|mknod)\\b"
		"|\\bshutil" DOT "(?:copy\\w*+|move|chown|make_archive|unpack_archive)\\b"
		"|" IMPORTS("os", "renames?|replace|l?chmod|l?chown|truncate|link|symlink|utime"
			    "|mkdir|makedirs|mkfifo|mknod")
		"|" IMPORTS("shutil", "copy\\w*+|move|chown|make_archive|unpack_archive")
	},
	/*
	 * data-out.  Catches `.post(` on anything; put/patch on an HTTP client
	 * by name (requests, httpx, aiohttp, urllib3, http, *session, *client);
	 * method="POST"/PUT/PATCH, or such a method given first to request/
	 * urlopen/stream/fetch/Request; a get/head/delete/options on a client
	 * whose URL is not one plain string literal (f-string, +, %, .format,
	 * a variable) or that carries params/data/json/files/content; a
	 * request("GET", url) with such a URL; on any object, a get whose
	 * URL is an http f-string or a concatenated http literal; urlopen
	 * with a built URL, positional data or data=; Request with a built URL
	 * or a body; smtplib, ftplib, paramiko, telnetlib, xmlrpc, websocket(s),
	 * pysftp, asyncssh; from-imports of post/put/patch; HTTP modules
	 * imported under another name.  Lets through, by design: a get of
	 * one literal URL (requests.get("https://example.com")) and its
	 * headers/cookies.  Also lets through: put/patch on a client whose
	 * variable is named otherwise, and other network libraries.
	 */
	[SCAN_DATA_OUT] = {
		"data-out", "sends data out over the network",
		"\\." WS "post" CALL
		"|" CLIENT DOT "(?:put|patch)" CALL
		"|\\bmethod" WS "=" WS PFX "[\"'](?i:post|put|patch)[\"']"
		"|" METHOD_OR_BARE "(?:request|urlopen|stream|fetch|Request)" CALL PFX
		"[\"'](?i:post|put|patch)[\"']"
		"|" CLIENT DOT "(?:get|head|delete|options)" CALL "(?:url" WS "=" WS ")?(?!"
		LIT WS "[,)]|\\))"
		"|" CLIENT DOT "(?:get|head|delete|options)" CALL "(?:(?!" PAYLOAD ")" ARG "," WS
		")*+" PAYLOAD
		"|" METHOD_OR_BARE "(?:request|stream|fetch)" CALL METHODLIT WS "," WS "(?:url" WS
		"=" WS ")?(?!" LIT WS "[,)]|\\))"
		"|" METHOD_OR_BARE "(?:get|head|delete|options|urlopen)" CALL
		"(?:(?:[fF][rR]?|[rR][fF])[\"'](?:https?|wss?|ftp)://"
		"|[\"'](?:https?|wss?|ftp)://[^\"'\\n]*+[\"']" WS "(?:[+%]|\\." WS "format\\b))"
		"|" URLOPEN "(?!" LIT WS "[,)]|(?:\\w++" DOT ")*+Request" CALL LIT WS "[,)]|\\))"
		"|" URLOPEN ARG "," WS "(?!" KW "|\\))"
		"|" URLOPEN "(?:(?!data" WS "=(?!=))" ARG "," WS ")*+data" WS "=(?!=)" WS "(?!None\\b)"
		"|\\bRequest" CALL "(?:(?!" PAYLOAD ")" ARG "," WS ")*+" PAYLOAD
		"|\\bRequest" CALL "(?!" METHODLIT WS ",)" ARG "," WS "(?!" KW "|\\))"
		"|\\bRequest" CALL "(?!" METHODLIT WS ",)(?:url" WS "=" WS ")?(?!" LIT WS "[,)]|\\))"
		"|\\b(?:smtplib|ftplib|paramiko|telnetlib|xmlrpc|websockets?|pysftp|asyncssh)\\b"
		"|" IMPORTS("requests|httpx", "post|put|patch")
		"|" IMPORT_AS("requests|httpx|aiohttp|urllib3|urllib\\.request")
	},
	/*
	 * secret-read.  Catches .ssh, .aws (so .aws/credentials and
	 * .aws\\credentials alike), .gnupg, .netrc, .pgpass, .git-credentials,
	 * .keystore_key, .docker/config.json, .kube/config, id_rsa/id_dsa/
	 * id_ecdsa/id_ed25519, /etc/shadow|gshadow|passwd|sudoers and
	 * /proc/<pid>/environ with either separator, netrc.netrc, dotenv's
	 * loaders, keyring.get_password, and .env as a file name: after a
	 * quote, separator, space or ~ ( , = + : }, and not followed by a
	 * name character, so os.environ, self.env and .environment pass.
	 * Lets through: paths assembled from pieces (".s" + "sh"), `.env`
	 * after a format directive ("%s.env"), and every other file the
	 * account can read: that is the grant's honest statement.
	 */
	[SCAN_SECRET_READ] = {
		"secret-read", "reads secrets such as keys or credentials",
		"\\.(?:ssh|aws|gnupg|netrc|pgpass|git-credentials|keystore_key)\\b"
		"|\\.(?:docker[/\\\\]++config\\.json|kube[/\\\\]++config)\\b"
		"|(?<![^\\s\"'/\\\\~(,=+:}])\\.env(?![\\w-])"
		"|\\bid_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?\\b"
		"|[/\\\\]etc[/\\\\]++(?:shadow|gshadow|passwd|sudoers)\\b"
		"|[/\\\\]proc[/\\\\]++[^\\s\"'/\\\\]{1,32}+[/\\\\]++environ\\b"
		"|\\bnetrc" DOT "netrc\\b"
		"|\\b(?:load_dotenv|dotenv_values|find_dotenv)\\b"
		"|\\bkeyring" DOT "get_(?:password|credential)\\b"
	},
};

/* ---- compile ------------------------------------------------------------ */

static pcre2_code *codes[SCAN_LABEL_COUNT];
static bool ready;

void scan_fini(void)
{
	for (size_t i = 0; i < SCAN_LABEL_COUNT; i++) {
		pcre2_code_free(codes[i]);
		codes[i] = NULL;
	}
	ready = false;
}

static int compile_one(size_t i, char *err, size_t errlen)
{
	PCRE2_UCHAR msg[160];
	PCRE2_SIZE off;
	int ec;

	codes[i] = pcre2_compile((PCRE2_SPTR)defs[i].pattern, PCRE2_ZERO_TERMINATED,
				 PCRE2_NEVER_UTF | PCRE2_NEVER_UCP | PCRE2_NEVER_BACKSLASH_C,
				 &ec, &off, NULL);
	if (!codes[i]) {
		pcre2_get_error_message(ec, msg, sizeof(msg));
		if (err && errlen)
			snprintf(err, errlen, "scan: pattern %s at offset %zu: %s",
				 defs[i].name, (size_t)off, (const char *)msg);
		return -1;
	}
	/* JIT is an optimisation: without it (no JIT support, or executable
	 * memory refused) pcre2_match() interprets the same pattern. */
	(void)pcre2_jit_compile(codes[i], PCRE2_JIT_COMPLETE);
	return 0;
}

int scan_init(char *err, size_t errlen)
{
	if (ready)
		return 0;
	for (size_t i = 0; i < SCAN_LABEL_COUNT; i++) {
		if (compile_one(i, err, errlen) < 0) {
			scan_fini();
			return -1;
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

static int match_one(struct scan_ctx *c, enum scan_label l, const char *code, size_t len,
		     struct scan_result *out)
{
	struct scan_hit *h = &out->hits[out->n];
	PCRE2_SIZE *ov;
	int rc;

	rc = pcre2_match(codes[l], (PCRE2_SPTR)code, len, 0, 0, c->md, c->mctx);
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (is_limit(rc)) {
		/* No position is known: point at the whole snippet. */
		*h = (struct scan_hit){ .label = l, .start = 0, .end = len, .line = 1,
					.limited = true };
		out->n++;
		return 0;
	}
	if (rc < 0)
		return -EIO;
	ov = pcre2_get_ovector_pointer(c->md);
	*h = (struct scan_hit){ .label = l, .start = ov[0], .end = ov[1],
				.line = line_of(code, ov[0]), .limited = false };
	out->n++;
	return 0;
}

int scan_snippet(const char *code, size_t len, size_t max_len, struct scan_result *out)
{
	struct scan_ctx c;
	int rc = 0;

	if (!out || (!code && len))
		return -EINVAL;
	if (len > max_len)
		return -E2BIG;
	out->n = 0;
	if (!ready && scan_init(NULL, 0) < 0)
		return -EIO;
	if (!code)
		code = "";	/* PCRE2 10.42 wants a subject pointer even for "" */
	if ((rc = ctx_init(&c)) < 0)
		return rc;
	for (int l = 0; l < SCAN_LABEL_COUNT && rc == 0; l++)
		rc = match_one(&c, (enum scan_label)l, code, len, out);
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
