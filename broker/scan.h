/* SPDX-License-Identifier: MIT
 * The execute_code pre-screen: seven labels matched on a snippet's source
 * text with PCRE2, its comments and string literals told apart from code as
 * Python tells them.  It reads the text, it does not analyse the program;
 * the worker's kernel profile is what holds when it is fooled.
 *
 * This module depends on nothing else in the project: the `kotoba scan`
 * CLI links it alone with -lpcre2-8.
 */
#ifndef KOTOBA_SCAN_H
#define KOTOBA_SCAN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum scan_label { SCAN_FS_DESTROY, SCAN_SHELL_SPAWN, SCAN_RAW_SOCKET, SCAN_DYNAMIC_EVAL,
		  SCAN_FS_WRITE, SCAN_DATA_OUT, SCAN_SECRET_READ, SCAN_LABEL_COUNT };

struct scan_hit {
	enum scan_label label;
	size_t start, end;	/* byte span of the first match in the source */
	unsigned line;		/* 1-based line of start */
	bool limited;		/* PCRE2 hit its match/depth limit: counted as a match (fail closed) */
};

/* Every label that matched, in label order. */
struct scan_result { size_t n; struct scan_hit hits[SCAN_LABEL_COUNT]; };

/*
 * Compile all patterns once, JIT where available.  Idempotent.  Returns 0,
 * or -1 with a message in err.  Call it before any second thread exists;
 * after it, scan_snippet() may be called from any thread.
 */
int scan_init(char *err, size_t errlen);
void scan_fini(void);

/*
 * Scan len bytes of code.  0 on success with out filled; -E2BIG if
 * len > max_len (refused before scanning); -EINVAL on a NULL argument;
 * -ENOMEM if match memory (or twice len for the views) cannot be had;
 * -EIO if the patterns cannot be compiled (scan_init() says why) or PCRE2
 * fails in an unexpected way.
 * UTF-8 is not checked here: the broker does that.
 */
int scan_snippet(const char *code, size_t len, size_t max_len, struct scan_result *out);

/*
 * Where the snippet will run, which decides one rule: fs-write lets through
 * a write whose path names the run's own places ($KOTOBA_OUTPUT_DIR,
 * TMPDIR, gettempdir, mkdtemp) only on the host, where a run nobody read
 * can write nowhere else.  In a container the working directory, the
 * user's project, is mounted read-write, and `open(os.environ.get(
 * "KOTOBA_OUTPUT_DIR") or "notes.txt", "w")` writes there: no exemption.
 */
enum scan_where { SCAN_ON_HOST, SCAN_IN_CONTAINER };

/* scan_snippet() for a run in that place (scan_snippet() is SCAN_ON_HOST). */
int scan_snippet_for(const char *code, size_t len, size_t max_len, enum scan_where where,
		     struct scan_result *out);

/*
 * The source encoding a declaration on the snippet's first two lines names,
 * found as python3's tokenizer finds it (PEP 263): a line of blanks (space,
 * tab, form feed) then '#', holding "coding", ':' or '=', blanks and a name
 * of letters, digits, '-', '_' and '.'; the second line counts only after
 * a first that holds nothing but blanks or a comment; a line ends at LF,
 * CR or CR LF; a UTF-8 byte-order mark first is skipped.  Points name at
 * the name in s; false when there is no declaration.
 */
bool scan_declared_encoding(const char *s, size_t n, const char **name, size_t *len);

/* Whether python3 reads a snippet declaring this encoding as UTF-8 (or as
 * ASCII, which reads UTF-8's ASCII the same and refuses the rest). */
bool scan_encoding_is_utf8(const char *name, size_t len);

const char *scan_label_name(enum scan_label l);		/* "fs-destroy", ... */
const char *scan_label_summary(enum scan_label l);	/* "deletes files", ... */

/*
 * The report for `kotoba scan`: one line per label,
 * "label  line N  bytes S-E  <matched text, one line, truncated>",
 * or "no labels".  Control characters in the text are escaped.
 */
void scan_print(FILE *out, const char *code, size_t len, const struct scan_result *r);
#endif
