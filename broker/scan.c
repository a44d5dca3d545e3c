/* SPDX-License-Identifier: MIT
 * The execute_code pre-screen (see docs: "What the grant still re-prompts
 * for").  Seven labels, each a short list of PCRE2 patterns matched once
 * over a view of the snippet's bytes: call patterns read the code view
 * (comments and string contents blanked, f-string fields kept: see
 * "views") unless the snippet can run a string (RUNS_STRINGS), secret-read
 * and module names the text view (comments blanked).
 * A few data-out patterns also test what the snippet binds a name to (a
 * client object, a URL built from a string: see "names").  This is a
 * denylist over Python source text: it reads the program, it does not
 * analyse it, and every label says in the table below what it
 * deliberately lets through.
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
 * matching (fail closed).  The views are made in one pass; the name tests
 * read bounded sets and search the text for at most LITERAL_CACHE names,
 * and a named pattern's refused match costs one more start position.
 *
 * Matching is byte-wise (no UTF mode): the patterns are ASCII, invalid
 * UTF-8 cannot make a match fail, and \w \s \b are the ASCII classes.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
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
/* A bare name, `eval(` but not `model.eval(` or `retval(`, nor the name
 * a `def` gives a function (`def eval(self):`, up to three blanks). */
#define NOTDEF "(?<!\\bdef[ \\t])(?<!\\bdef[ \\t]{2})(?<!\\bdef[ \\t]{3})"
#define BARE "(?<![\\w.])" NOTDEF

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

/* fs-write: after a library writer's `(` (DataFrame.to_csv, ndarray.tofile):
 * a first positional argument, or the path by keyword; `to_csv()` and
 * `to_json(orient="records")` return text and write nothing. */
#define WRITER_ARGS                                                                      \
	"(?:(?!" KW "|\\))|(?:" ARG "," WS ")*+(?:path_or_buf|path|excel_writer|buf|fname|fid" \
	"|file)" WS "=(?!=))"
/* fs-write: after an archive constructor's `(`: a writing mode literal,
 * second or by keyword (the mode is a short word, kept in the code view). */
#define ARCHIVE_WRITE                                                                    \
	"(?:(?!(?:mode" WS "=" WS ")?" WRITELIT WS "[,)])" ARG "," WS ")*+(?:mode" WS "=" WS \
	")?" WRITELIT WS "[,)]"
/* fs-write, on the text view: a database argument that is no file to write
 * (":memory:", "file::memory:?cache=shared", a URI opened mode=ro). */
#define SQLITE_NO_FILE                                                                   \
	"(?:database" WS "=" WS ")?" PFX "[\"'](?:file:)?:memory:[^\"'\\n]{0,64}+[\"']"   \
	"|(?:database" WS "=" WS ")?" PFX "[\"']file:[^\"'\\n]{0,200}?[?&]mode=ro\\b"
/* fs-write, on the text view: a first argument that names one of the run's
 * own places (its output directory $KOTOBA_OUTPUT_DIR, its scratch: TMPDIR,
 * tempfile's gettempdir/mkdtemp).  Text only: an unlabelled snippet runs
 * unattended, where the host's sandbox keeps every write in those places
 * anyway.  Read by into_private() alone, and only for a run on the host. */
#define INTO_PRIVATE "[^,\\n]{0,200}?\\b(?:KOTOBA_OUTPUT_DIR|TMPDIR|gettempdir|mkdtemp)\\b"

/* data-out: keyword arguments that carry a request body or query. */
#define PAYLOAD "(?:params|data|json|files|content)" WS "=(?!=)"
/* data-out: a URL argument that is one bare name, captured: whether it
 * sends depends on what the snippet binds the name to (NAME_NOT_LITERAL). */
#define NAME_URL "(?:url" WS "=" WS ")?+(\\w++)" WS "[,)]"
/* data-out: after get( etc.: the URL is not one plain literal.  A bare name
 * is captured for NAME_NOT_LITERAL, so the pattern using this is named and
 * puts it last among its alternatives (a match its test refuses is not
 * tried again at the same place). */
#define BUILT_URL "(?:url" WS "=" WS ")?+(?:(\\w++)" WS "[,)]|(?!" LIT WS "[,)]|\\)))"
/* data-out: after a client's get( etc.: a payload keyword, a second
 * positional argument (requests' params, an opener's data), a built URL. */
#define GET_ARGS                                                                         \
	"(?:(?:(?!" PAYLOAD ")" ARG "," WS ")*+" PAYLOAD "|" ARG "," WS "(?!" KW "|\\))|" \
	BUILT_URL ")"
/* data-out: a method literal that sends. */
#define SENDS PFX "[\"'](?i:post|put|patch)[\"']"
/* data-out: after an HTTP client's name (requests, session...). */
#define CLIENT_USE                                                                       \
	"\\b" DOT "(?:(?:put|patch)" CALL "|(?:get|head|delete|options)" CALL GET_ARGS ")"
/* data-out: after a client object and its dot (an opener's open too). */
#define CLIENT_SENDS "(?:(?:put|patch)" CALL "|(?:get|head|delete|options|open)" CALL GET_ARGS ")"
/*
 * data-out: the constructors of HTTP client objects.  Session and Client
 * are common words: they count after their module's name, or alone when the
 * snippet imports from that module (see bind_clients()); the others count
 * alone.
 */
#define CTOR_MODULE "requests|httpx|aiohttp|httplib2"
#define CTOR_GENERIC "Session|session|Client|Http"
#define CTOR_CAPS                                                                        \
	"AsyncClient|ClientSession|PoolManager|ProxyManager|HTTPS?Connection(?:Pool)?"       \
	"|OpenerDirector"
#define CTOR_FUNCS "build_opener|connection_from_url"
/* data-out: after get(: an http URL as an f-string, or a literal then + % .format */
#define HTTP_BUILT                                                                       \
	"(?:(?:[fF][rR]?|[rR][fF])[\"'](?:https?|wss?|ftp)://"                           \
	"|[\"'](?:https?|wss?|ftp)://[^\"'\\n]*+[\"']" WS "(?:[+%]|\\." WS "format\\b))"
/* data-out: after request( / stream( / fetch(. */
#define REQUEST_ARGS "(?:" SENDS "|" METHODLIT WS "," WS BUILT_URL ")"
/* data-out: after urlopen(: a sending method, a built URL (a Request of a
 * literal is checked as a Request), positional data or data=. */
#define URLOPEN_ARGS                                                                     \
	"(?:" SENDS "|" ARG "," WS "(?!" KW "|\\))"                                       \
	"|(?:(?!data" WS "=(?!=))" ARG "," WS ")*+data" WS "=(?!=)" WS "(?!None\\b)"      \
	"|(?!(?:\\w++" DOT ")*+Request" CALL LIT WS "[,)])" BUILT_URL ")"
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

#define MAX_PATTERNS 32

/*
 * A named pattern's match counts only if a test on the names it reads
 * holds; the tests look at what the snippet binds those names to (see
 * "names" below).  Group 1 is the URL argument's name where there is one.
 */
enum name_test {
	NAME_NOT_LITERAL,	/* no URL name, or one not bound only to plain literals */
	ON_CLIENT,		/* the object before the dot is an HTTP client, and
				 * NAME_NOT_LITERAL */
	NAME_BUILT,		/* the URL name is bound to a URL built from a string */
};

struct named { const char *re; enum name_test test; };

/* Which view of the snippet a pattern reads (see "views" below). */
enum view { VIEW_CODE, VIEW_TEXT };

struct label_def {
	const char *name;
	const char *summary;
	const char *const *code;	/* NULL-terminated; read on the code view */
	const char *const *text;	/* NULL-terminated; read on the text view */
	const struct named *named;	/* { NULL }-terminated; on the code view */
	/* NULL-terminated; read as the plain code patterns are, but a match
	 * whose group 1 starts an argument that names the run's own places
	 * (INTO_PRIVATE, on the text view) does not count on the host. */
	const char *const *private_arg;
	const char *const *private_text;	/* the same, read on the text view */
};

#define PATTERNS(...) .code = ((const char *const[]){ __VA_ARGS__, NULL })
#define TEXT(...) .text = ((const char *const[]){ __VA_ARGS__, NULL })
#define PRIVATE_ARG(...) .private_arg = ((const char *const[]){ __VA_ARGS__, NULL })
#define PRIVATE_TEXT(...) .private_text = ((const char *const[]){ __VA_ARGS__, NULL })
#define NAMED(...) .named = ((const struct named[]){ __VA_ARGS__, { NULL, NAME_BUILT } })

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
	 * posix_spawn*, through os or its C half posix (the same calls); any
	 * attribute of subprocess (subprocess.run, .PIPE: the use, not the
	 * import, so a bare `import subprocess` passes); pty.spawn; asyncio's
	 * (create_)subprocess_exec/shell; any mention of ctypes, _ctypes,
	 * cffi, importlib or _posixsubprocess; the from-imports of those os
	 * names or `from os import *`; any `from subprocess import`; `import
	 * os as o` / `import subprocess as sp` (os is matched by name, so an
	 * alias would hide every spelling under it); os or subprocess used as
	 * a value (`m = os`); getattr/vars on them; os.__dict__; sys.modules.
	 * ctypes, _ctypes, cffi, importlib and _posixsubprocess are read in
	 * strings too (a module named in a string can be imported by it).
	 * Lets through:
	 * names built from strings elsewhere, os reached through another
	 * module under another name, getattr/vars on posix (the escape suite's
	 * way past the matcher, to reach the kernel's layers), multiprocessing
	 * (it starts Python, not other programs).
	 */
	[SCAN_SHELL_SPAWN] = {
		"shell-spawn", "starts other programs", PATTERNS(
		"\\b(?:os|posix)" DOT "(?:system|popen|startfile|exec\\w*+|spawn\\w*+"
		"|posix_spawn\\w*+|__dict__)\\b|\\b" VALUE("o", "s"),
		"\\bsubprocess(?:" DOT "\\w|_(?:exec|shell)\\b)|\\b" VALUE("s", "ubprocess"),
		"\\bcreate_subprocess_(?:exec|shell)\\b",
		"\\bpty" DOT "spawn\\b",
		"\\bimport" IMPORT_AS("os|posix|subprocess"),
		"\\bfrom(?:" IMPORT_LIST("os|posix", "system|popen|startfile|exec\\w*+|spawn\\w*+"
					 "|posix_spawn\\w*+")
		"|" SPP "subprocess" SPP "import\\b"
		"|" IMPORT_LIST("pty", "spawn") ")",
		"\\bgetattr" CALL "(?:os|subprocess|pty)\\b",
		"\\bvars" CALL "(?:os|subprocess|pty)\\b",
		"\\bsys" DOT "modules\\b"),
		TEXT("\\bctypes\\b", "\\b_ctypes\\b", "\\bcffi\\b", "\\bimportlib\\b",
		     "\\b_posixsubprocess\\b")
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
	 * eval); `x.eval(` and `re.compile(` are methods and pass, and so is
	 * the name a def gives (`def eval(self):`).  Also the builtins./
	 * __builtins__. spellings, __builtins__[...], getattr on builtins,
	 * their from-imports, eval/exec/compile/__import__ used as a value
	 * (`map(eval, xs)`), runpy (in strings too), pickle/marshal/dill loads
	 * (a pickle can name os.system without spelling it), types.
	 * FunctionType/CodeType.  Lets through: code reached by names built at run time
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
		"\\bdill" DOT "(?:loads?|Unpickler)\\b",
		"\\bmarshal" DOT "loads?\\b",
		"\\btypes" DOT "(?:FunctionType|CodeType|LambdaType)\\b"),
		TEXT("\\brunpy\\b")
	},
	/*
	 * fs-write.  Catches open(...) (builtin, or io/codecs/gzip/bz2/lzma/
	 * tarfile/aiofiles .open) whose second positional argument is anything
	 * but a read-mode literal ("r", "rb", 'rt'...: a variable mode is
	 * flagged), whose mode= is anything but a read literal, or that takes
	 * *args, unless its first argument names the run's own places
	 * (INTO_PRIVATE, text view, read up to that argument's first comma;
	 * for a run on the host only, scan_where);
	 * the arguments are read across balanced brackets, so the path
	 * may be a nested call, and a call nested deeper than six brackets is
	 * flagged unread.  Any other `.open(`/`.fdopen(` (Path.open, zipfile)
	 * with a write-mode literal; os.open with a write flag or without
	 * O_RDONLY; .write_text/.write_bytes/.touch/.symlink_to/.hardlink_to/
	 * .chmod calls; os.rename/renames/replace/chmod/chown/truncate/link/
	 * symlink/utime/mkdir/makedirs/mkfifo/mknod; shutil.copy*, move, chown,
	 * make_archive, unpack_archive; their from-imports; open used as a
	 * value (`f = open`).  Brackets and commas in strings and comments
	 * are not read (the code view).  Lets through: an `.open(` of another
	 * library given a variable mode, writes through an fd from elsewhere
	 * (os.write on a pipe), and library functions that write to a path
	 * they are given, other than those named below.
	 *
	 * The library writers agents use most: pandas' to_csv/to_json/to_html/
	 * to_xml/to_markdown/to_latex/to_string with a first positional
	 * argument or the path by keyword, and to_parquet/to_excel/to_feather/
	 * to_hdf/to_pickle/to_stata/to_orc likewise (`df.to_csv()` returns
	 * text); ndarray.tofile; np/numpy.save, savetxt, savez,
	 * savez_compressed (also from-imported), and .savetxt/.savez on any
	 * object; torch.save; savefig (plt's or a figure's), unless its first
	 * argument names the run's own places (INTO_PRIVATE: KOTOBA_OUTPUT_DIR,
	 * TMPDIR; text view; on the host only); sqlite3.connect unless its database is
	 * ":memory:", a URI opened mode=ro or in those places (text view), and
	 * `from sqlite3 import connect`; logging's FileHandler,
	 * RotatingFileHandler, TimedRotatingFileHandler, WatchedFileHandler and
	 * basicConfig(filename=...); zipfile.ZipFile/PyZipFile and
	 * tarfile.TarFile given a writing mode.  Lets through: these under
	 * another name (`import sqlite3 as q`, `save = np.save`), plt.show(),
	 * ":memory:" databases, reads (read_csv, np.load, mode "r").
	 */
	[SCAN_FS_WRITE] = {
		"fs-write", "writes files", PRIVATE_ARG(
		"open(?:(?<![\\w.]open)|(?<=\\bio\\.open|\\bcodecs\\.open|\\bgzip\\.open"
		"|\\bbz2\\.open|\\blzma\\.open|\\btarfile\\.open|\\baiofiles\\.open))"
		CALL "()" OPEN_MODE),
		PATTERNS("\\b" VALUE("o", "pen"),
		"\\bos" DOT "(?:open" CALL OS_OPEN_FLAGS
		"|(?:renames?|replace|l?chmod|l?chown|truncate|link|symlink|utime|mkdir"
		"|makedirs|mkfifo|mknod)\\b)",
		"\\bshutil" DOT "(?:copy\\w*+|move|chown|make_archive|unpack_archive)\\b",
		"\\bfrom(?:" IMPORT_LIST("os", "renames?|replace|l?chmod|l?chown|truncate|link"
					 "|symlink|utime|mkdir|makedirs|mkfifo|mknod")
		"|" IMPORT_LIST("shutil", "copy\\w*+|move|chown|make_archive|unpack_archive") ")",
		"\\." WS "(?:(?:open|fdopen)" CALL "(?:(?!(?:mode" WS "=" WS ")?" WRITELIT WS "[,)])"
		ARG "," WS ")*+(?:mode" WS "=" WS ")?" WRITELIT WS "[,)]"
		"|(?:write_text|write_bytes|touch|symlink_to|hardlink_to|l?chmod)" CALL ")",
		"\\." WS "(?:to_(?:csv|json|html|xml|markdown|latex|string|parquet|excel|feather|hdf"
		"|pickle|stata|orc)|tofile)" CALL WRITER_ARGS,
		"\\b(?:np|numpy)" DOT "(?:save|savetxt|savez|savez_compressed)\\b"
		"|\\btorch" DOT "save\\b",
		"\\." WS "(?:savetxt|savez|savez_compressed)" CALL,
		"\\bfrom" IMPORT_LIST("numpy", "save|savetxt|savez|savez_compressed")
		"|\\bfrom" IMPORT_LIST("sqlite3", "connect"),
		"(?:Rotating|TimedRotating|Watched)?+FileHandler" WS "\\("
		"|\\bbasicConfig" CALL "(?:(?!filename" WS "=)" ARG "," WS ")*+filename" WS "=(?!=)",
		"\\b(?:ZipFile|PyZipFile|TarFile)" CALL ARCHIVE_WRITE),
		PRIVATE_TEXT("\\bsavefig" CALL "()",
		"\\bsqlite3" DOT "connect" CALL "()(?!" SQLITE_NO_FILE ")")
	},
	/*
	 * data-out.  Catches `.post(` on anything; put/patch on an HTTP client:
	 * a word ending requests, http, httpx, urllib3, session, sess or
	 * client, a name bound to a client constructor (requests/httpx/aiohttp
	 * Session or Client, httpx.AsyncClient, aiohttp.ClientSession, urllib3
	 * PoolManager, http.client HTTP(S)Connection, build_opener...: by `=`
	 * or `with ... as`), or such a constructor's call itself
	 * (`requests.Session().put(`); method="POST"/PUT/PATCH, or such a
	 * method given first to request/urlopen/stream/fetch/Request; a
	 * get/head/delete/options (and an opener's open) on a client whose URL
	 * is not one plain string literal (f-string, +, %, .format, a name not
	 * bound only to literals), or that carries params/data/json/files/
	 * content or a second positional argument; request("GET", url) with
	 * such a URL; on any object, a get or open whose URL is an http
	 * f-string or a concatenated http literal, or a name bound to one
	 * (`url = "https://x/?q=" + s` anywhere in the snippet, `url += s`);
	 * urlopen with a built URL, positional data or data=; Request with a
	 * built URL or a body; smtplib, ftplib, paramiko, telnetlib, xmlrpc,
	 * websocket(s), pysftp, asyncssh, in strings too; from-imports of
	 * post/put/patch; HTTP modules imported under another name.  Lets
	 * through, by design: a get of one literal URL, or of a name bound
	 * only to literals (`URL = "https://x"` and only read as a call's
	 * first argument), and its headers/cookies.  Also lets through: put/
	 * patch on a client reached otherwise (a list element, a function's
	 * result, a parameter), a URL built from a name that is not itself a
	 * URL literal (`base + q` where base came from elsewhere), and other
	 * network libraries.
	 */
	[SCAN_DATA_OUT] = {
		"data-out", "sends data out over the network", PATTERNS(
		"\\bmethod" WS "=" WS SENDS,
		"\\bfrom" IMPORT_LIST("requests|httpx", "post|put|patch"),
		BARE "get" CALL HTTP_BUILT,
		"\\bimport" IMPORT_AS("requests|httpx|aiohttp|urllib3|urllib\\.request")),
		TEXT("\\bsmtplib\\b", "\\bftplib\\b", "\\bp(?:aramiko|ysftp)\\b", "\\btelnetlib\\b",
		     "\\bxmlrpc\\b", "\\bwebsockets?\\b", "\\basyncssh\\b"),
		NAMED(
		{ "requests" CLIENT_USE "|" BARE "request" CALL REQUEST_ARGS, NAME_NOT_LITERAL },
		{ "httpx?" CLIENT_USE, NAME_NOT_LITERAL },
		{ "sess(?:ion)?" CLIENT_USE, NAME_NOT_LITERAL },
		{ BARE "stream" CALL REQUEST_ARGS, NAME_NOT_LITERAL },
		{ "client" CLIENT_USE, NAME_NOT_LITERAL },
		{ "urllib3" CLIENT_USE "|(?<!\\w)" NOTDEF "urlopen" CALL URLOPEN_ARGS,
		  NAME_NOT_LITERAL },
		{ "\\bRequest" CALL REQUEST_OBJ_ARGS, NAME_NOT_LITERAL },
		{ BARE "fetch" CALL REQUEST_ARGS, NAME_NOT_LITERAL },
		{ "\\." WS "(?:post" CALL "|(?:request|stream|fetch)" CALL REQUEST_ARGS
		  "|(?:get|head|delete|options)" CALL HTTP_BUILT ")", NAME_NOT_LITERAL },
		{ "\\." WS CLIENT_SENDS, ON_CLIENT },
		{ "\\." WS "(?:get|head|delete|options|open)" CALL NAME_URL, NAME_BUILT },
		{ BARE "get" CALL NAME_URL, NAME_BUILT })
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
	 * honest statement.  It reads strings, not comments.
	 */
	[SCAN_SECRET_READ] = {
		"secret-read", "reads secrets such as keys or credentials", TEXT(
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

/*
 * Patterns that are not a label's own: they find what the snippet binds
 * names to.  A client constructor, after a dot or alone (split by first
 * letter, so that PCRE2 can skip to it), then CTOR_CALL: its arguments,
 * the call's closing bracket captured (`requests.Session().put(`) and the
 * name after `as` in `with ... as s` captured next.  After a dot, group 1
 * marks a Session/Client, whose module is checked (CTOR_MODULE_AT).
 * IMPORTS_CLIENT: `from requests import ...`, which makes a bare
 * Session/Client a client.  RUNTIME_NAMES: ways to bind a name that the
 * text does not show.
 */
#define CTOR_CALL "\\b" CALL "(?:" BAL5 "(\\))(?:" WS "as\\b" WS "(\\w++))?+)?+"
#define BIND_DOTTED "\\." WS "(?:(" CTOR_GENERIC ")|" CTOR_CAPS "|" CTOR_FUNCS ")" CTOR_CALL
#define BIND_CAPS "(?<![\\w.])(?:" CTOR_CAPS ")" CTOR_CALL
#define BIND_FUNCS "(?<![\\w.])(?:" CTOR_FUNCS ")" CTOR_CALL
#define BIND_GENERIC "(?<![\\w.])(?:" CTOR_GENERIC ")" CTOR_CALL
#define CTOR_MODULE_AT "(?:" CTOR_MODULE ")\\b"
#define IMPORTS_CLIENT "\\bfrom" SPP "(?:" CTOR_MODULE ")" SPP "import\\b"

#define RUNTIME_NAMES                                                                    \
	"\\b(?:globals|locals|vars|setattr|__dict__|__globals__|__builtins__|builtins"       \
	"|_getframe|currentframe|f_globals|f_locals|gc)\\b|\\bimport" SPS "\\*"

enum name_re {
	BIND_DOTTED_RE, BIND_CAPS_RE, BIND_FUNCS_RE, BIND_GENERIC_RE, CTOR_MODULE_AT_RE,
	IMPORTS_CLIENT_RE, RUNTIME_NAMES_RE, INTO_PRIVATE_RE, NAME_RE_COUNT
};

static const char *const name_re_src[NAME_RE_COUNT] = {
	[BIND_DOTTED_RE] = BIND_DOTTED,
	[BIND_CAPS_RE] = BIND_CAPS,
	[BIND_FUNCS_RE] = BIND_FUNCS,
	[BIND_GENERIC_RE] = BIND_GENERIC,
	[CTOR_MODULE_AT_RE] = CTOR_MODULE_AT,
	[IMPORTS_CLIENT_RE] = IMPORTS_CLIENT,
	[RUNTIME_NAMES_RE] = RUNTIME_NAMES,
	[INTO_PRIVATE_RE] = INTO_PRIVATE,
};

/* One compiled pattern of a label: the view it reads and, for a named
 * pattern, the test its match must pass. */
struct compiled {
	pcre2_code *re;
	enum view view;
	bool named;
	bool private_arg;	/* a PRIVATE_ARG pattern */
	enum name_test test;
};

static struct compiled codes[SCAN_LABEL_COUNT][MAX_PATTERNS];
static pcre2_code *name_res[NAME_RE_COUNT];
static bool ready;

void scan_fini(void)
{
	for (size_t l = 0; l < SCAN_LABEL_COUNT; l++) {
		for (size_t k = 0; k < MAX_PATTERNS; k++) {
			pcre2_code_free(codes[l][k].re);
			codes[l][k].re = NULL;
		}
	}
	for (size_t h = 0; h < NAME_RE_COUNT; h++) {
		pcre2_code_free(name_res[h]);
		name_res[h] = NULL;
	}
	ready = false;
}

static pcre2_code *compile_re(const char *src, const char *what, size_t k, char *err,
			      size_t errlen)
{
	PCRE2_UCHAR msg[160];
	PCRE2_SIZE off;
	int ec;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED,
				       PCRE2_NEVER_UTF | PCRE2_NEVER_UCP | PCRE2_NEVER_BACKSLASH_C,
				       &ec, &off, NULL);

	if (!re) {
		pcre2_get_error_message(ec, msg, sizeof(msg));
		if (err && errlen)
			snprintf(err, errlen, "scan: %s pattern %zu at offset %zu: %s", what,
				 k + 1, (size_t)off, (const char *)msg);
		return NULL;
	}
	/* JIT is an optimisation: without it (no JIT support, or executable
	 * memory refused) pcre2_match() interprets the same pattern. */
	(void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
	return re;
}

/* Appends one pattern to label l's list; -1 with err set on failure. */
static int add_pattern(size_t l, size_t *k, const char *src, enum view v, const struct named *nm,
		       bool private_arg, char *err, size_t errlen)
{
	if (*k == MAX_PATTERNS) {
		if (err && errlen)
			snprintf(err, errlen, "scan: %s has over %d patterns", defs[l].name,
				 MAX_PATTERNS);
		return -1;
	}
	codes[l][*k] = (struct compiled){ .view = v, .named = nm != NULL,
					  .private_arg = private_arg,
					  .test = nm ? nm->test : NAME_BUILT };
	codes[l][*k].re = compile_re(src, defs[l].name, *k, err, errlen);
	if (!codes[l][*k].re)
		return -1;
	++*k;
	return 0;
}

static int compile_label(size_t l, char *err, size_t errlen)
{
	const struct label_def *d = &defs[l];
	size_t k = 0;

	for (size_t i = 0; d->code && d->code[i]; i++)
		if (add_pattern(l, &k, d->code[i], VIEW_CODE, NULL, false, err, errlen) < 0)
			return -1;
	for (size_t i = 0; d->text && d->text[i]; i++)
		if (add_pattern(l, &k, d->text[i], VIEW_TEXT, NULL, false, err, errlen) < 0)
			return -1;
	for (size_t i = 0; d->private_arg && d->private_arg[i]; i++)
		if (add_pattern(l, &k, d->private_arg[i], VIEW_CODE, NULL, true, err, errlen) < 0)
			return -1;
	for (size_t i = 0; d->private_text && d->private_text[i]; i++)
		if (add_pattern(l, &k, d->private_text[i], VIEW_TEXT, NULL, true, err, errlen) < 0)
			return -1;
	for (size_t i = 0; d->named && d->named[i].re; i++)
		if (add_pattern(l, &k, d->named[i].re, VIEW_CODE, &d->named[i], false, err,
				errlen) < 0)
			return -1;
	return 0;
}

int scan_init(char *err, size_t errlen)
{
	if (ready)
		return 0;
	for (size_t l = 0; l < SCAN_LABEL_COUNT; l++) {
		if (compile_label(l, err, errlen) < 0) {
			scan_fini();
			return -1;
		}
	}
	for (size_t h = 0; h < NAME_RE_COUNT; h++) {
		name_res[h] = compile_re(name_re_src[h], "name", h, err, errlen);
		if (!name_res[h]) {
			scan_fini();
			return -1;
		}
	}
	ready = true;
	return 0;
}

/* ---- views -------------------------------------------------------------- */

/*
 * The patterns read two views of the snippet, each exactly as long as it,
 * so that a span found in either is the same bytes of the snippet:
 *
 *   code: comments become spaces, and the contents of string literals
 *         become FILL, except a leading URL scheme ("https://") and a
 *         content that is one short word ("w", "rb", "POST"): open()'s
 *         mode and an HTTP method are read there, and no code pattern
 *         can match a quoted word.  Call patterns read this view, so
 *         `"eval("` and `# os.system(...)` are not code.
 *   text: comments become spaces, strings stay: secret-read reads paths
 *         and module names are read in strings too (`__import__("ctypes")`).
 *
 * One pass, reading strings as Python 3.12 does (PEP 701): prefixes
 * (r, b, u, f, t in any case and order), triple quotes, escapes (a
 * backslash takes the next byte, or a CR LF), a single-quoted string ends
 * at the line's end (CR or LF: it did not close, which Python refuses);
 * an f- or t-string's replacement fields are code, nested strings in them
 * read the same way, with `{{` `}}` escapes and the format spec after a
 * top-level colon read as literal text.  An older Python reads every
 * program it accepts the same way (it allows less inside a field).
 *
 * Where the reader could be wrong it leaves the text as it is in both
 * views, which only ever shows more code: a source encoding other than
 * UTF-8 declared on the first two lines (Python would decode the bytes
 * differently), and nesting deeper than MAX_NEST.
 */
#define FILL '~'
#define MAX_NEST 32
#define WORD_MAX 12

struct lex_frame {
	bool field;		/* a replacement field, else a string */
	bool spec;		/* field: in its format spec (literal text) */
	bool fmt, triple;	/* string: f- or t-string; """ or ''' */
	char quote;		/* string */
	unsigned depth;		/* field: brackets open in it */
	int owner;		/* field: the index of its string (a field in a
				 * format spec belongs to the spec's string) */
	size_t part;		/* string: where its literal content began */
	bool whole;		/* string: no field yet, so part is all of it */
};

struct lexer {
	const char *s;
	size_t n, i;
	char *code;
	struct lex_frame st[MAX_NEST];
	int top;		/* -1: top-level code */
};

static bool is_name_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c >= 0x80;
}

static bool is_line_end(char c)
{
	return c == '\n' || c == '\r';
}

/* The bytes that can change the lexer's state: in code, and in a literal. */
static const bool code_stop[256] = {
	['#'] = true, ['"'] = true, ['\''] = true, ['('] = true, [')'] = true, ['['] = true,
	[']'] = true, ['{'] = true, ['}'] = true, [':'] = true,
};
static const bool literal_stop[256] = {
	['"'] = true, ['\''] = true, ['\\'] = true, ['\n'] = true, ['\r'] = true, ['{'] = true,
	['}'] = true,
};

/* String content in the code view: FILL, line ends kept. */
static void fill(struct lexer *lx, size_t k)
{
	for (size_t j = lx->i; j < lx->i + k && j < lx->n; j++)
		if (!is_line_end(lx->s[j]))
			lx->code[j] = FILL;
	lx->i += k;
}

static void blank_comment(struct lexer *lx, char *text)
{
	size_t j = lx->i;

	while (j < lx->n && !is_line_end(lx->s[j]))
		j++;
	memset(lx->code + lx->i, ' ', j - lx->i);
	memset(text + lx->i, ' ', j - lx->i);
	lx->i = j;
}

/* The length of a URL scheme ("https://") at s[i], or 0. */
static size_t scheme_len(const char *s, size_t n, size_t i)
{
	static const char *const schemes[] = { "https://", "http://", "wss://", "ws://",
					       "ftp://" };

	for (size_t k = 0; k < sizeof(schemes) / sizeof(schemes[0]); k++) {
		size_t l = strlen(schemes[k]);

		if (n - i >= l && !memcmp(s + i, schemes[k], l))
			return l;
	}
	return 0;
}

/* An open string's prefix: the name bytes just before the quote, if they
 * are a prefix at all (more than three is a name, which Python refuses). */
static bool prefix_is_fmt(const char *s, size_t q)
{
	size_t k = q;
	bool fmt = false;

	while (k > 0 && is_name_byte((unsigned char)s[k - 1]) && q - k < 4)
		k--;
	if (q - k > 3)
		return false;
	for (size_t j = k; j < q; j++) {
		char c = (char)(s[j] | 0x20);

		if (c == 'f' || c == 't')
			fmt = true;
		else if (c != 'r' && c != 'b' && c != 'u')
			return false;
	}
	return fmt;
}

static bool push(struct lexer *lx, struct lex_frame f)
{
	if (lx->top + 1 >= MAX_NEST)
		return false;
	lx->st[++lx->top] = f;
	return true;
}

static bool open_string(struct lexer *lx)
{
	const char *s = lx->s;
	char q = s[lx->i];
	bool triple = lx->n - lx->i >= 3 && s[lx->i + 1] == q && s[lx->i + 2] == q;
	struct lex_frame f = { .quote = q, .triple = triple, .fmt = prefix_is_fmt(s, lx->i),
			   .whole = true };

	lx->i += triple ? 3 : 1;
	lx->i += scheme_len(s, lx->n, lx->i);
	f.part = lx->i;
	return push(lx, f);
}

/* A short word as a string's whole content is shown: see the code view. */
static void keep_word(struct lexer *lx, const struct lex_frame *str, size_t end)
{
	size_t a = str->part;

	if (!str->whole || end <= a || end - a > WORD_MAX)
		return;
	for (size_t j = a; j < end; j++) {
		char c = lx->s[j];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '+'))
			return;
	}
	memcpy(lx->code + a, lx->s + a, end - a);
}

/* Code, at top level or in a replacement field. */
static bool lex_code(struct lexer *lx, char *text)
{
	struct lex_frame *f = lx->top >= 0 ? &lx->st[lx->top] : NULL;

	switch (lx->s[lx->i]) {
	case '#':
		blank_comment(lx, text);
		return true;
	case '"':
	case '\'':
		return open_string(lx);
	case '(':
	case '[':
	case '{':
		if (f)
			f->depth++;
		break;
	case ')':
	case ']':
		if (f && f->depth)
			f->depth--;
		break;
	case '}':
		if (f && !f->depth) {
			lx->top--;	/* the field ends: back in its string */
			lx->i++;
			return true;
		}
		if (f)
			f->depth--;
		break;
	case ':':
		if (f && !f->depth)
			f->spec = true;
		break;
	default:
		break;
	}
	lx->i++;
	while (lx->i < lx->n && !code_stop[(unsigned char)lx->s[lx->i]])
		lx->i++;	/* nothing to do until the next of these */
	return true;
}

/* The literal text of a string, or of a format spec (then f is the field,
 * and the string is its owner). */
static bool lex_literal(struct lexer *lx)
{
	struct lex_frame *f = &lx->st[lx->top];
	struct lex_frame *str = f->field ? &lx->st[f->owner] : f;
	const char *s = lx->s;
	size_t i = lx->i, left = lx->n - i;
	char c = s[i];

	if (c == str->quote && (!str->triple || (left >= 3 && s[i + 1] == c && s[i + 2] == c))) {
		keep_word(lx, str, i);
		lx->top = (int)(str - lx->st) - 1;
		lx->i += str->triple ? 3 : 1;
		return true;
	}
	if (is_line_end(c) && !str->triple) {
		lx->top = (int)(str - lx->st) - 1;	/* unterminated: code again */
		return true;
	}
	if (c == '\\' && left >= 2 && !(str->fmt && (s[i + 1] == '{' || s[i + 1] == '}'))) {
		fill(lx, left >= 3 && s[i + 1] == '\r' && s[i + 2] == '\n' ? 3 : 2);
		return true;
	}
	if (str->fmt && c == '{' && !(left >= 2 && s[i + 1] == '{')) {
		str->whole = false;
		lx->i++;
		return push(lx, (struct lex_frame){ .field = true, .owner = (int)(str - lx->st) });
	}
	if (str->fmt && c == '}' && f->field) {
		lx->top--;	/* the end of the spec ends its field */
		lx->i++;
		return true;
	}
	if (str->fmt && (c == '{' || c == '}') && left >= 2 && s[i + 1] == c) {
		fill(lx, 2);
		return true;
	}
	if (is_line_end(c)) {
		lx->i++;	/* a triple-quoted string's line end stays */
		return true;
	}
	do {
		lx->code[lx->i++] = FILL;	/* up to the next byte that matters */
	} while (lx->i < lx->n && !literal_stop[(unsigned char)s[lx->i]]);
	return true;
}

/* Where the line starting at i ends: at LF, CR or CR LF, as python3's
 * tokenizer reads lines while it looks for a coding declaration. */
static size_t line_end(const char *s, size_t n, size_t i)
{
	while (i < n && !is_line_end(s[i]))
		i++;
	return i;
}

static size_t after_line_end(const char *s, size_t n, size_t e)
{
	if (e < n && s[e] == '\r')
		e++;
	if (e < n && s[e] == '\n')
		e++;
	return e;
}

/* The declaration on the line [b, e), if it is one; *comment_only says
 * whether the line holds nothing but blanks or a comment. */
static bool coding_on_line(const char *s, size_t b, size_t e, const char **name,
			   size_t *len, bool *comment_only)
{
	size_t i = b;

	while (i < e && (s[i] == ' ' || s[i] == '\t' || s[i] == '\f'))
		i++;
	*comment_only = i == e || s[i] == '#';
	if (i == e || s[i] != '#')
		return false;
	for (; i + 7 <= e; i++) {
		size_t k;

		if (memcmp(s + i, "coding", 6) || (s[i + 6] != ':' && s[i + 6] != '='))
			continue;
		for (k = i + 7; k < e && (s[k] == ' ' || s[k] == '\t'); k++)
			;
		*name = s + k;
		while (k < e && (isalnum((unsigned char)s[k]) || s[k] == '-' || s[k] == '_' ||
				 s[k] == '.'))
			k++;
		*len = (size_t)(s + k - *name);
		if (*len)
			return true;
	}
	return false;
}

bool scan_declared_encoding(const char *s, size_t n, const char **name, size_t *len)
{
	size_t b = 0, e;
	bool comment_only;

	if (n >= 3 && !memcmp(s, "\xef\xbb\xbf", 3))
		b = 3;
	e = line_end(s, n, b);
	if (coding_on_line(s, b, e, name, len, &comment_only))
		return true;
	if (!comment_only || e == n)
		return false;
	b = after_line_end(s, n, e);
	return coding_on_line(s, b, line_end(s, n, b), name, len, &comment_only);
}

bool scan_encoding_is_utf8(const char *name, size_t len)
{
	char low[16];

	if (len >= sizeof(low))
		len = sizeof(low) - 1; /* "utf-8-" and anything: python3 reads UTF-8 */
	for (size_t i = 0; i < len; i++)
		low[i] = name[i] == '_' ? '-' : (char)tolower((unsigned char)name[i]);
	low[len] = '\0';
	return !strcmp(low, "utf-8") || !strncmp(low, "utf-8-", 6) || !strcmp(low, "utf8") ||
	       !strcmp(low, "ascii") || !strcmp(low, "us-ascii");
}

/* A declared encoding python3 would decode the bytes with other than as
 * UTF-8 (ASCII reads the same, or not at all). */
static bool foreign_encoding(const char *s, size_t n)
{
	const char *name;
	size_t len;

	return scan_declared_encoding(s, n, &name, &len) && !scan_encoding_is_utf8(name, len);
}

/* Fills code and text (each len bytes) with the views of the snippet. */
static void make_views(const char *s, size_t len, char *code, char *text)
{
	struct lexer lx = { .s = s, .n = len, .code = code, .top = -1 };

	memcpy(code, s, len);
	memcpy(text, s, len);
	if (foreign_encoding(s, len))
		return;
	while (lx.i < lx.n) {
		const struct lex_frame *f = lx.top >= 0 ? &lx.st[lx.top] : NULL;
		bool ok = !f || (f->field && !f->spec) ? lex_code(&lx, text) : lex_literal(&lx);

		if (!ok)
			return;	/* too deep: the rest stays as it is */
	}
}

/* ---- names -------------------------------------------------------------- */

/*
 * What the snippet binds names to, for data-out's named patterns: a put on
 * `s` sends if `s` is bound to an HTTP client; a get of `url` sends if
 * `url` is bound to a URL built from a string, and, on a client, unless it
 * is bound to nothing but plain literals.  Read from the code view, once
 * per scan and only when a named pattern matched: one pattern for client
 * constructors, one memchr walk over the `=` signs for URLs.
 *
 * Every answer errs towards sending.  The sets are bounded: a full set
 * holds every name.  A name bound where the text does not show it
 * (globals(), setattr, `import *`...) is not literal, and neither is any
 * name in a snippet with a non-ASCII identifier: Python folds identifiers
 * (NFKC), so `ｓ` and `s` are one name, and every set holds every name.
 */
#define NAMES_MAX 32
#define LITERAL_CACHE 16

struct name { size_t at, len; };	/* bytes of the code view */
struct name_set { size_t n; bool all; struct name v[NAMES_MAX]; };

struct names {
	bool read;
	bool exotic;		/* a non-ASCII identifier */
	int runtime;		/* a way to bind names the text does not show:
				 * 1 yes, 0 no, -1 not looked for yet */
	struct name_set clients, urls, built;
	struct name_set calls;	/* closing brackets of constructor calls, by place */
	size_t ncache;
	struct { struct name n; bool literal; } cache[LITERAL_CACHE];
};

static bool same_name(const char *s, struct name a, struct name b)
{
	return a.len == b.len && !memcmp(s + a.at, s + b.at, a.len);
}

static bool in_set(const struct names *nm, const struct name_set *set, const char *s,
		   struct name m)
{
	if (set->all || (nm->exotic && set->n))
		return true;
	for (size_t i = 0; i < set->n; i++)
		if (same_name(s, set->v[i], m))
			return true;
	return false;
}

static void set_add(struct name_set *set, const char *s, struct name m)
{
	for (size_t i = 0; i < set->n; i++)
		if (same_name(s, set->v[i], m))
			return;
	if (set->n == NAMES_MAX)
		set->all = true;
	else
		set->v[set->n++] = m;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\f';
}

static size_t blanks_back(const char *s, size_t k)
{
	while (k > 0 && is_blank(s[k - 1]))
		k--;
	return k;
}

static size_t blanks_fwd(const char *s, size_t len, size_t k)
{
	while (k < len && is_blank(s[k]))
		k++;
	return k;
}

/* Blanks, line ends and backslash continuations: what WS skips. */
static size_t space_back(const char *s, size_t k)
{
	while (k > 0 && (is_blank(s[k - 1]) || is_line_end(s[k - 1]) || s[k - 1] == '\\' ||
			 s[k - 1] == '\v'))
		k--;
	return k;
}

static struct name word_back(const char *s, size_t end)
{
	size_t k = end;

	while (k > 0 && is_name_byte((unsigned char)s[k - 1]))
		k--;
	return (struct name){ k, end - k };
}

static struct name word_at(const char *s, size_t len, size_t at)
{
	size_t k = at;

	while (k < len && is_name_byte((unsigned char)s[k]))
		k++;
	return (struct name){ at, k - at };
}

static bool is_word(const char *s, struct name m, const char *w)
{
	return m.len == strlen(w) && !memcmp(s + m.at, w, m.len);
}

/* The end of an expression statement, or of an argument. */
static bool ends_value(const char *s, size_t len, size_t k)
{
	return k == len || is_line_end(s[k]) || s[k] == ';' || s[k] == ')' || s[k] == ']' ||
	       s[k] == '}' || s[k] == ',';
}

/*
 * The name an `=` at e assigns to, with its operator (0, or the `+` of
 * `+=`...).  False for comparisons and for targets that are not a name
 * (`d[k] = v`); `x.s = v` counts as `s`.
 */
static bool assign_target(const char *s, size_t e, struct name *out, char *op)
{
	size_t k = e;

	*op = 0;
	if (k > 0 && strchr("=!<>", s[k - 1]) && s[k - 1])
		return false;
	if (k > 0 && s[k - 1] && strchr("+-*/%&|^@:", s[k - 1]))
		*op = s[--k];
	*out = word_back(s, blanks_back(s, k));
	return out->len > 0;
}

/* Where the constructor matched at `at` is assigned: `s = requests.Session(`. */
static bool assigned_to(const char *s, size_t at, struct name *out)
{
	size_t k = at;
	char op;

	/* back over the dotted name (`requests . Session`) and an `await` */
	while (k > 0 && (is_name_byte((unsigned char)s[k - 1]) || s[k - 1] == '.' ||
			 is_blank(s[k - 1])))
		k--;
	if (k == 0 || s[k - 1] != '=')
		return false;
	return assign_target(s, k - 1, out, &op) && (op == 0 || op == ':');
}

/* One past the closing quote of the literal opened at q, or len. */
static size_t literal_end(const char *s, size_t len, size_t q)
{
	char c = s[q];
	bool triple = len - q >= 3 && s[q + 1] == c && s[q + 2] == c;

	for (size_t j = q + (triple ? 3 : 1); j < len; j++) {
		if (!triple && is_line_end(s[j]))
			return len;
		if (s[j] == c && (!triple || (len - j >= 3 && s[j + 1] == c && s[j + 2] == c)))
			return j + (triple ? 3 : 1);
	}
	return len;
}

static bool is_prefix_byte(char c)
{
	return strchr("rRbBuUfFtT", c) && c;
}

enum rhs { RHS_OTHER, RHS_URL, RHS_BUILT };

/* An f-string right of an `=`, content at c: a URL with a field is built. */
static enum rhs fstring_rhs(const struct names *nm, const char *s, size_t len, size_t c,
			    char quote)
{
	size_t sl = scheme_len(s, len, c);

	if (!sl) {
		struct name m = word_at(s, len, blanks_fwd(s, len, c + 1));

		return c < len && s[c] == '{' && m.len &&
		       (in_set(nm, &nm->urls, s, m) || in_set(nm, &nm->built, s, m)) ? RHS_BUILT
										    : RHS_OTHER;
	}
	for (size_t j = c + sl; j < len && !is_line_end(s[j]); j++) {
		if (s[j] == '{')
			return RHS_BUILT;
		if (s[j] == quote)
			return RHS_URL;
	}
	return RHS_OTHER;
}

/* What the right side of an `=`, starting at r, makes of the name. */
static enum rhs classify_rhs(const struct names *nm, const char *s, size_t len, size_t r)
{
	size_t q = r, after;
	struct name m;

	while (q < len && q - r < 3 && is_prefix_byte(s[q]))
		q++;
	if (q < len && (s[q] == '"' || s[q] == '\'')) {
		bool triple = len - q >= 3 && s[q + 1] == s[q] && s[q + 2] == s[q];
		size_t c = q + (triple ? 3 : 1);

		if (prefix_is_fmt(s, q))
			return fstring_rhs(nm, s, len, c, s[q]);
		if (!scheme_len(s, len, c))
			return RHS_OTHER;
		after = blanks_fwd(s, len, literal_end(s, len, q));
		return ends_value(s, len, after) ? RHS_URL : RHS_BUILT;
	}
	m = word_at(s, len, r);
	if (!m.len || !(in_set(nm, &nm->urls, s, m) || in_set(nm, &nm->built, s, m)))
		return RHS_OTHER;
	after = blanks_fwd(s, len, r + m.len);
	if (ends_value(s, len, after))
		return in_set(nm, &nm->built, s, m) ? RHS_BUILT : RHS_URL;
	return RHS_BUILT;	/* base + q, base % q, base.format(q), base[...] */
}

static void bind_urls(struct names *nm, const char *s, size_t len)
{
	for (const char *p = s; (p = memchr(p, '=', (size_t)(s + len - p))); p++) {
		size_t e = (size_t)(p - s);
		struct name lhs;
		char op;
		enum rhs r;

		if (e + 1 < len && s[e + 1] == '=') {
			p++;
			continue;
		}
		if (!assign_target(s, e, &lhs, &op))
			continue;
		r = classify_rhs(nm, s, len, blanks_fwd(s, len, e + 1));
		if ((op == '+' || op == '%') &&
		    (in_set(nm, &nm->urls, s, lhs) || in_set(nm, &nm->built, s, lhs)))
			r = RHS_BUILT;
		if (r == RHS_BUILT)
			set_add(&nm->built, s, lhs);
		else if (r == RHS_URL)
			set_add(&nm->urls, s, lhs);
	}
}

/* Python's keywords and soft keywords: a name before `(` that is one of
 * these does not make a call (`for (u) in`, `case (u):`). */
static bool is_keyword(const char *s, struct name m)
{
#define WORD(w) { w, sizeof(w) - 1 }
	static const struct { const char *w; size_t n; } kw[] = {
		WORD("False"), WORD("None"), WORD("True"), WORD("and"), WORD("as"),
		WORD("assert"), WORD("async"), WORD("await"), WORD("break"), WORD("case"),
		WORD("class"), WORD("continue"), WORD("def"), WORD("del"), WORD("elif"),
		WORD("else"), WORD("except"), WORD("finally"), WORD("for"), WORD("from"),
		WORD("global"), WORD("if"), WORD("import"), WORD("in"), WORD("is"),
		WORD("lambda"), WORD("match"), WORD("nonlocal"), WORD("not"), WORD("or"),
		WORD("pass"), WORD("raise"), WORD("return"), WORD("try"), WORD("while"),
		WORD("with"), WORD("yield"),
	};
#undef WORD

	for (size_t i = 0; i < sizeof(kw) / sizeof(kw[0]); i++)
		if (kw[i].n == m.len && !memcmp(s + m.at, kw[i].w, m.len))
			return true;
	return false;
}

/* `URL = "literal"` alone on its line (or after a `;`), name at [a, b). */
static bool is_literal_binding(const char *s, size_t len, size_t a, size_t b)
{
	size_t k = blanks_back(s, a), q;

	if (k > 0 && !is_line_end(s[k - 1]) && s[k - 1] != ';')
		return false;
	k = blanks_fwd(s, len, b);
	if (k >= len || s[k] != '=' || (k + 1 < len && s[k + 1] == '='))
		return false;
	q = k = blanks_fwd(s, len, k + 1);
	while (q < len && q - k < 2 && s[q] && strchr("rRbBuU", s[q]))
		q++;
	if (q >= len || (s[q] != '"' && s[q] != '\''))
		return false;
	k = blanks_fwd(s, len, literal_end(s, len, q));
	return k == len || is_line_end(s[k]) || s[k] == ';';
}

/* The name at [a, b) as the first argument of a call: f(URL) or f(URL, ...),
 * where f is not `def`'s name nor a keyword. */
static bool is_call_argument(const char *s, size_t len, size_t a, size_t b)
{
	size_t k = space_back(s, a), j = b;
	struct name f;

	while (j < len && (is_blank(s[j]) || is_line_end(s[j]) || s[j] == '\\'))
		j++;
	if (k == 0 || s[k - 1] != '(' || j == len || (s[j] != ',' && s[j] != ')'))
		return false;
	k = blanks_back(s, k - 1);
	if (k > 0 && (s[k - 1] == ')' || s[k - 1] == ']'))
		return true;
	f = word_back(s, k);
	if (!f.len || is_keyword(s, f))
		return false;
	return !is_word(s, word_back(s, blanks_back(s, f.at)), "def");
}

/* Every appearance of the name m, in the code view, is a literal binding or
 * a call's first argument, and there is a literal binding. */
static bool bound_to_literals_only(const char *s, size_t len, struct name m)
{
	const char *w = s + m.at;
	bool bound = false;

	/* memchr, not memmem: each call reads only up to what it finds */
	for (const char *p = s; (p = memchr(p, w[0], (size_t)(s + len - p))); p++) {
		size_t a = (size_t)(p - s), b = a + m.len;

		if (b > len || memcmp(p, w, m.len) ||
		    (a > 0 && is_name_byte((unsigned char)s[a - 1])) ||
		    (b < len && is_name_byte((unsigned char)s[b])))
			continue;
		if (is_literal_binding(s, len, a, b))
			bound = true;
		else if (!is_call_argument(s, len, a, b))
			return false;
	}
	return bound;
}

static bool literal_only(struct names *nm, const char *s, size_t len, struct name m)
{
	bool lit;

	if (!m.len || nm->exotic || nm->runtime)
		return false;
	for (size_t i = 0; i < nm->ncache; i++)
		if (same_name(s, nm->cache[i].n, m))
			return nm->cache[i].literal;
	if (nm->ncache == LITERAL_CACHE)
		return false;	/* bounded work: more names than that send */
	lit = bound_to_literals_only(s, len, m);
	nm->cache[nm->ncache].n = m;
	nm->cache[nm->ncache++].literal = lit;
	return lit;
}

/* ---- match -------------------------------------------------------------- */

/* What one scan needs besides the patterns, per call so scans may run
 * in parallel (a JIT stack must not be shared between threads). */
struct scan_ctx {
	pcre2_match_context *mctx;
	pcre2_jit_stack *jstack;
	pcre2_match_data *md;
	char *views;		/* code view, then text view */
	const char *view[2];	/* by enum view */
	size_t len;
	struct names names;
	enum view plain;	/* the view the plain code patterns read */
	enum scan_where where;
};

static void ctx_free(struct scan_ctx *c)
{
	free(c->views);
	pcre2_match_data_free(c->md);
	pcre2_jit_stack_free(c->jstack);
	pcre2_match_context_free(c->mctx);
}

static int ctx_init(struct scan_ctx *c, const char *code, size_t len)
{
	memset(c, 0, sizeof(*c));
	c->mctx = pcre2_match_context_create(NULL);
	c->md = pcre2_match_data_create(8, NULL);
	c->views = malloc(2 * len + 1);
	if (!c->mctx || !c->md || !c->views) {
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
	make_views(code, len, c->views, c->views + len);
	c->view[VIEW_CODE] = c->views;
	c->view[VIEW_TEXT] = c->views + len;
	c->len = len;
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

/* After a dot, a Session or Client counts only on its module: the name
 * before the dot at `dot` is one of CTOR_MODULE. */
static bool module_before(struct scan_ctx *c, size_t dot)
{
	struct name m = word_back(c->view[VIEW_CODE], space_back(c->view[VIEW_CODE], dot));

	return m.len && pcre2_match(name_res[CTOR_MODULE_AT_RE], (PCRE2_SPTR)c->view[VIEW_CODE],
				    m.at + m.len, m.at, PCRE2_ANCHORED, c->md, c->mctx) >= 0;
}

static void add_call(struct name_set *calls, size_t at)
{
	if (calls->n == NAMES_MAX)
		calls->all = true;
	else
		calls->v[calls->n++] = (struct name){ at, 1 };
}

/*
 * One constructor pattern's calls: the bracket that closes each, and the
 * name it is bound to (`s = requests.Session()`, `with ... as s`).  g is
 * the group of the bracket (the `as` name is the next); after a dot, group
 * 1 marks a Session/Client.
 */
static void bind_ctor(struct scan_ctx *c, enum name_re h, int g)
{
	const char *s = c->view[VIEW_CODE];
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
	struct names *nm = &c->names;
	size_t at = 0, start, bracket, as, as_end;
	struct name m;
	int rc;

	while (at <= c->len) {
		rc = pcre2_match(name_res[h], (PCRE2_SPTR)s, c->len, at, 0, c->md, c->mctx);
		if (rc == PCRE2_ERROR_NOMATCH)
			return;
		if (rc < 0) {
			nm->clients.all = true;	/* could not read: every name */
			return;
		}
		start = ov[0];
		at = start + 1;
		bracket = rc > g ? ov[2 * g] : PCRE2_UNSET;
		as = rc > g + 1 ? ov[2 * g + 2] : PCRE2_UNSET;
		as_end = rc > g + 1 ? ov[2 * g + 3] : 0;
		if (h == BIND_DOTTED_RE && rc > 1 && ov[2] != PCRE2_UNSET &&
		    !module_before(c, start))
			continue;	/* a Session of something else */
		if (bracket != PCRE2_UNSET)
			add_call(&nm->calls, bracket);
		if (as != PCRE2_UNSET)
			set_add(&nm->clients, s, (struct name){ as, as_end - as });
		else if (assigned_to(s, start, &m))
			set_add(&nm->clients, s, m);
	}
}

static bool has_match(struct scan_ctx *c, enum name_re h);

/* Client objects: constructed after a dot, alone, and (when the snippet
 * imports Session or Client from an HTTP module) Session/Client alone. */
static void bind_clients(struct scan_ctx *c)
{
	bind_ctor(c, BIND_DOTTED_RE, 2);
	bind_ctor(c, BIND_CAPS_RE, 1);
	bind_ctor(c, BIND_FUNCS_RE, 1);
	if (has_match(c, IMPORTS_CLIENT_RE))
		bind_ctor(c, BIND_GENERIC_RE, 1);
}

static bool has_match(struct scan_ctx *c, enum name_re h)
{
	int rc = pcre2_match(name_res[h], (PCRE2_SPTR)c->view[VIEW_CODE], c->len, 0, 0, c->md,
			     c->mctx);

	return rc != PCRE2_ERROR_NOMATCH;	/* a limit or error counts as found */
}

/* A byte above 0x7f; in the code view that is in an identifier. */
static bool has_high_byte(const char *s, size_t len)
{
	size_t i = 0;
	uint64_t w;

	for (; i + sizeof(w) <= len; i += sizeof(w)) {
		memcpy(&w, s + i, sizeof(w));
		if (w & 0x8080808080808080u)
			return true;
	}
	for (; i < len; i++)
		if ((unsigned char)s[i] >= 0x80)
			return true;
	return false;
}

static void read_names(struct scan_ctx *c)
{
	struct names *nm = &c->names;
	const char *s = c->view[VIEW_CODE];

	nm->read = true;
	nm->runtime = -1;
	nm->exotic = has_high_byte(s, c->len);
	bind_clients(c);
	bind_urls(nm, s, c->len);
}

/* The object a method is called on, before the dot at `dot`: a name
 * bound to a client, or a constructor call's closing bracket. */
static bool on_client(struct scan_ctx *c, size_t dot)
{
	const char *s = c->view[VIEW_CODE];
	size_t k = space_back(s, dot);
	struct name m = word_back(s, k);

	if (k > 0 && s[k - 1] == ')') {
		const struct name_set *calls = &c->names.calls;

		for (size_t i = 0; i < calls->n; i++)
			if (calls->v[i].at == k - 1)
				return true;
		return calls->all;
	}
	return m.len && in_set(&c->names, &c->names.clients, s, m);
}

/* A test that no match can pass in this snippet: its pattern is skipped. */
static bool test_vacuous(struct scan_ctx *c, enum name_test t)
{
	const struct names *nm = &c->names;

	if (!nm->read)
		read_names(c);
	switch (t) {
	case ON_CLIENT:
		return !nm->clients.n && !nm->clients.all && !nm->calls.n && !nm->calls.all;
	case NAME_BUILT:
		return !nm->built.n && !nm->built.all;
	case NAME_NOT_LITERAL:
	default:
		return false;
	}
}

/* NAME_NOT_LITERAL for a URL name m (none: true). */
static bool not_literal(struct scan_ctx *c, struct name m)
{
	struct names *nm = &c->names;

	if (!m.len)
		return true;
	if (nm->runtime < 0)
		nm->runtime = has_match(c, RUNTIME_NAMES_RE);
	return !literal_only(nm, c->view[VIEW_CODE], c->len, m);
}

static bool test_holds(struct scan_ctx *c, enum name_test t, const PCRE2_SIZE *ov, int rc)
{
	struct names *nm = &c->names;
	const char *s = c->view[VIEW_CODE];
	struct name url = { 0, 0 };

	for (int g = 1; g < rc; g++) {
		if (ov[2 * g] != PCRE2_UNSET) {
			url = (struct name){ ov[2 * g], ov[2 * g + 1] - ov[2 * g] };
			break;
		}
	}
	switch (t) {
	case NAME_NOT_LITERAL:
		return not_literal(c, url);
	case ON_CLIENT:
		return on_client(c, ov[0]) && not_literal(c, url);
	case NAME_BUILT:
		return url.len && in_set(nm, &nm->built, s, url);
	default:
		return true;
	}
}

/*
 * The earliest match of one pattern from its view, or PCRE2_ERROR_NOMATCH.
 * A named pattern's matches that fail their test are stepped over, one
 * start position at a time as PCRE2 itself would.
 */
/* A PRIVATE_ARG match whose group 1 starts an argument naming the run's
 * own places, in a run on the host (scan_where says why not in a
 * container).  Its own match data: c->md holds the match being judged. */
static bool into_private(struct scan_ctx *c, const PCRE2_SIZE *ov, int rc)
{
	pcre2_match_data *md;
	int r;

	if (c->where != SCAN_ON_HOST || rc < 2 || ov[2] == PCRE2_UNSET)
		return false;
	md = pcre2_match_data_create(1, NULL);
	if (!md)
		return false;	/* not known to be private: the match counts */
	r = pcre2_match(name_res[INTO_PRIVATE_RE], (PCRE2_SPTR)c->view[VIEW_TEXT], c->len, ov[2],
			PCRE2_ANCHORED, md, c->mctx);
	pcre2_match_data_free(md);
	return r > 0;
}

/* A match that does not count: a named one whose test fails, or a
 * PRIVATE_ARG/PRIVATE_TEXT one into the run's own places on the host. */
static bool stepped_over(struct scan_ctx *c, const struct compiled *p, const PCRE2_SIZE *ov,
			 int rc)
{
	return (p->named && !test_holds(c, p->test, ov, rc)) ||
	       (p->private_arg && into_private(c, ov, rc));
}

static int match_one(struct scan_ctx *c, const struct compiled *p, PCRE2_SIZE *span)
{
	PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
	size_t at = 0;
	int rc;

	enum view view = p->view == VIEW_CODE && !p->named ? c->plain : p->view;

	if (p->named && test_vacuous(c, p->test))
		return PCRE2_ERROR_NOMATCH;
	do {
		rc = pcre2_match(p->re, (PCRE2_SPTR)c->view[view], c->len, at, 0, c->md,
				 c->mctx);
		if (rc < 0)
			return rc;
		at = ov[0] + 1;
	} while (stepped_over(c, p, ov, rc) && at <= c->len);
	if (stepped_over(c, p, ov, rc))
		return PCRE2_ERROR_NOMATCH;
	span[0] = ov[0];
	span[1] = ov[1];
	return rc;
}

/*
 * One label: the earliest match over its patterns.  A pattern that hit a
 * limit marks the label limited unless another found a real match, whose
 * place is then the better thing to show.
 */
static int match_label(struct scan_ctx *c, enum scan_label l, const char *code,
		       struct scan_result *out)
{
	struct scan_hit h = { .label = l };
	bool found = false, limited = false;
	PCRE2_SIZE span[2];

	for (size_t k = 0; k < MAX_PATTERNS && codes[l][k].re; k++) {
		int rc = match_one(c, &codes[l][k], span);

		if (rc == PCRE2_ERROR_NOMATCH)
			continue;
		if (is_limit(rc)) {
			limited = true;
			continue;
		}
		if (rc < 0)
			return -EIO;
		if (!found || span[0] < h.start) {
			h.start = span[0];
			h.end = span[1];
			found = true;
		}
	}
	if (found) {
		h.line = line_of(code, h.start);
	} else if (limited) {
		/* No position is known: point at the whole snippet. */
		h = (struct scan_hit){ .label = l, .start = 0, .end = c->len, .line = 1,
				       .limited = true };
	} else {
		return 0;
	}
	out->hits[out->n++] = h;
	return 0;
}

/*
 * Code that runs a string as Python: eval, exec or compile called by name
 * (not a method, not a def), or the standard library's other runners
 * (timeit, the profilers and debuggers, code and codeop, doctest, runpy).
 * In a snippet that has one, a string may be code and which one cannot be
 * told from the text: the plain code patterns then read strings too (the
 * text view), as they would in a snippet that had no strings.  One walk
 * over the code view's names.
 */
static bool runs_strings(const char *s, size_t len)
{
#define WORD(w) { w, sizeof(w) - 1, false }
	static const struct { const char *w; size_t n; bool bare; } runners[] = {
		{ "eval", 4, true }, { "exec", 4, true }, { "compile", 7, true },
		WORD("timeit"), WORD("Timer"), WORD("cProfile"), WORD("profile"), WORD("pdb"),
		WORD("bdb"), WORD("Trace"), WORD("runctx"), WORD("codeop"),
		WORD("compile_command"), WORD("InteractiveConsole"),
		WORD("InteractiveInterpreter"), WORD("interact"), WORD("runsource"),
		WORD("runcode"), WORD("doctest"), WORD("runpy"),
	};
#undef WORD
	size_t i = 0;

	while (i < len) {
		struct name w;

		while (i < len && !is_name_byte((unsigned char)s[i]))
			i++;
		w = word_at(s, len, i);
		i += w.len;
		for (size_t k = 0; k < sizeof(runners) / sizeof(runners[0]); k++) {
			if (runners[k].n != w.len || memcmp(s + w.at, runners[k].w, w.len))
				continue;
			/* eval etc. as a method (model.eval()) or a def's name is not one */
			if (!runners[k].bare ||
			    ((w.at == 0 || s[w.at - 1] != '.') &&
			     !is_word(s, word_back(s, blanks_back(s, w.at)), "def")))
				return true;
		}
	}
	return false;
}

int scan_snippet(const char *code, size_t len, size_t max_len, struct scan_result *out)
{
	return scan_snippet_for(code, len, max_len, SCAN_ON_HOST, out);
}

int scan_snippet_for(const char *code, size_t len, size_t max_len, enum scan_where where,
		     struct scan_result *out)
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
	if ((rc = ctx_init(&c, code, len)) < 0)
		return rc;
	c.plain = runs_strings(c.view[VIEW_CODE], len) ? VIEW_TEXT : VIEW_CODE;
	c.where = where;
	for (int l = 0; l < SCAN_LABEL_COUNT && rc == 0; l++)
		rc = match_label(&c, (enum scan_label)l, code, out);
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
