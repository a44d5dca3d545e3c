// link: client/lib/render.c proto/limits.c proto/probes.c
/* Text for a terminal (client/lib/render.c): nothing a snippet, a client or
 * the broker wrote reaches the terminal as a control or an invisible code
 * point, and the card shows every line of the snippet with its number. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/kotoba-client.h"

static char *shown(const char *s, size_t len, unsigned flags)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	assert_non_null(f);
	kotoba_show(f, s, len, flags);
	fclose(f);
	return buf;
}

static void expect_shown(const char *in, const char *want)
{
	char *got = shown(in, strlen(in), 0);

	assert_string_equal(got, want);
	free(got);
}

static void test_plain_text_is_unchanged(void **state)
{
	(void)state;
	expect_shown("print('hello')", "print('hello')");
	expect_shown("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");
	/* a backslash is code, not an escape: it stays as it is */
	expect_shown("'\\x1b'", "'\\x1b'");
}

static void test_controls_are_shown(void **state)
{
	(void)state;
	expect_shown("a\x1b[1A\x1b[2Kb", "a\\x1b[1A\\x1b[2Kb");
	expect_shown("\x1b]52;c;aWQ=\x07", "\\x1b]52;c;aWQ=\\x07");
	expect_shown("x\ry", "x\\x0dy");
	expect_shown("\x7f\x01\b", "\\x7f\\x01\\x08");
	expect_shown("a\nb", "a\\x0ab");
	/* C1 controls: U+009B is CSI to a terminal that reads 8-bit controls */
	expect_shown("\xc2\x9b" "1A\xc2\x85", "<U+009B>1A<U+0085>");
}

static void test_invisible_code_points_are_shown(void **state)
{
	(void)state;
	/* bidirectional overrides, embeddings, isolates and marks */
	expect_shown("a\xe2\x80\xae" "b\xe2\x81\xa6" "c\xe2\x81\xa9\xe2\x80\x8f\xd8\x9c",
		     "a<U+202E>b<U+2066>c<U+2069><U+200F><U+061C>");
	/* zero-width space, joiners, word joiner, BOM, soft hyphen */
	expect_shown("\xe2\x80\x8b\xe2\x80\x8c\xe2\x80\x8d\xe2\x81\xa0\xef\xbb\xbf\xc2\xad",
		     "<U+200B><U+200C><U+200D><U+2060><U+FEFF><U+00AD>");
	/* line and paragraph separators, Mongolian vowel separator */
	expect_shown("\xe2\x80\xa8\xe2\x80\xa9\xe1\xa0\x8e", "<U+2028><U+2029><U+180E>");
	/* a variation selector, a tag character, the Hangul filler (a letter
	 * to Python, blank on screen) */
	expect_shown("\xef\xb8\x8f\xf3\xa0\x81\x81\xe3\x85\xa4", "<U+FE0F><U+E0041><U+3164>");
	/* noncharacters */
	expect_shown("\xef\xbf\xbe\xf0\x9f\xbf\xbf", "<U+FFFE><U+1FFFF>");
}

static void test_bytes_that_are_not_utf8_are_shown(void **state)
{
	(void)state;
	expect_shown("\xff", "\\xff");
	expect_shown("\xc0\xaf", "\\xc0\\xaf");             /* overlong '/' */
	expect_shown("\xed\xa0\x80", "\\xed\\xa0\\x80");     /* a surrogate */
	expect_shown("\xe2\x80", "\\xe2\\x80");              /* cut short */
	expect_shown("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
}

static void test_tabs_and_lines(void **state)
{
	char *s;

	(void)state;
	expect_shown("a\tb", "a       b");
	s = shown("a\nb", 3, KOTOBA_SHOW_LINES);
	assert_string_equal(s, "a\nb");
	free(s);
	s = shown("\x1b", 1, KOTOBA_SHOW_COLOUR);
	assert_string_equal(s, "\033[7m\\x1b\033[27m");
	free(s);
}

static void test_combining_marks_do_not_stack(void **state)
{
	(void)state;
	expect_shown("e\xcc\x81\xcc\x81\xcc\x81", "e\xcc\x81\xcc\x81<U+0301>");
}

static const struct kotoba_card_env env[] = { { "TZ", "Europe/Paris\x1b[2J" },
					      { "LANG", "C.UTF-8" } };
static const struct kotoba_card_limit limits[] = { { "cpu_s", 600 },
						   { "memory_bytes", 4294967296 },
						   { "output_bytes", 200000 } };
static const struct kotoba_card_label label = { "shell-spawn", 0, 9, 1 };

static struct kotoba_card card_of(const char *snippet)
{
	return (struct kotoba_card){
		.id = "c-1", .snippet = snippet, .snippet_len = strlen(snippet),
		.labels = &label, .n_labels = 1, .family = "execute_code",
		.family_button = "Always allow her to run Python",
		.family_detail = "Any code she writes then runs on this computer without asking, "
				 "until you revoke it in Settings.",
		.expires_ms = 300000, .reason = "the snippet matches the pre-screen",
		.cwd = "/home/ada/project", .timeout_ms = 60000, .env = env, .n_env = 2,
		.limits = limits, .n_limits = 3,
	};
}

/* Every row of the text is at most `width` columns (all ASCII here). */
static void assert_rows_fit(const char *text, unsigned width)
{
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		if (len > width)
			fail_msg("row wider than %u: '%.*s'", width, (int)len, p);
		p += len + (nl != NULL);
	}
}

static void test_card_shows_every_line_numbered(void **state)
{
	char *code = NULL, *text, want[64];
	size_t n = 0;
	FILE *f = open_memstream(&code, &n);

	(void)state;
	assert_non_null(f);
	fputs("import os; os.system(\"id > card_pwned\")\n", f);
	for (int i = 2; i <= 200; i++)
		fprintf(f, "print(%d)\n", i);
	fclose(f);
	struct kotoba_card c = card_of(code);

	text = kotoba_card_text(&c, 80, 0);
	assert_non_null(text);
	assert_non_null(strstr(text, "\n   1  import os; os.system(\"id > card_pwned\")   <- shell-spawn\n"));
	for (int i = 2; i <= 200; i++) {
		snprintf(want, sizeof(want), "\n%4d  print(%d)\n", i, i);
		if (!strstr(text, want))
			fail_msg("line %d is not on the card", i);
	}
	assert_non_null(strstr(text, "The snippet: 200 lines,"));
	assert_null(strstr(text, "this snippet contains"));
	assert_rows_fit(text, 80);
	free(text);
	free(code);
}

static void test_card_shows_what_the_client_set(void **state)
{
	struct kotoba_card c = card_of("print(1)\n");
	char *text = kotoba_card_text(&c, 80, 0);

	(void)state;
	assert_non_null(text);
	assert_non_null(strstr(text, "Runs in:     /home/ada/project\n"));
	assert_non_null(strstr(text, "Imports:     the working directory's modules can be imported,"));
	assert_non_null(strstr(text, "Time limit:  60.000 s wall clock\n"));
	assert_non_null(strstr(text, "Limits:      cpu 600 s, memory 4 GiB, output 200000 bytes\n"));
	assert_non_null(strstr(text, "             TZ=Europe/Paris\\x1b[2J\n"));
	assert_non_null(strstr(text, "             LANG=C.UTF-8\n"));
	assert_non_null(strstr(text, "the lines above contain 1 invisible or control character,"));
	assert_null(strchr(text, '\033'));
	free(text);
}

static void test_card_wraps_long_lines_and_counts_escapes(void **state)
{
	char code[600], *text;
	struct kotoba_card c;

	(void)state;
	/* the call is far to the right, past any screen: it must still show */
	snprintf(code, sizeof(code), "x = 1%300s; os.system('id')\n#\x1b[1A\x1b[2K\xe2\x80\xae\n"
		 "\tif x:\n", "");
	c = card_of(code);
	text = kotoba_card_text(&c, 60, 0);
	assert_non_null(text);
	assert_non_null(strstr(text, "\n    +  "));
	assert_non_null(strstr(text, " ; os.system('id')"));
	assert_non_null(strstr(text, "\n   2  #\\x1b[1A\\x1b[2K<U+202E>\n"));
	assert_non_null(strstr(text, "\n   3          if x:\n")); /* the tab: 8 columns */
	assert_non_null(strstr(text, "this snippet contains 3 invisible"));
	assert_null(strchr(text, '\033'));
	assert_rows_fit(text, 60);
	free(text);
	/* in colour the only escapes are the terminal reset it starts with
	 * and the card's own attributes */
	text = kotoba_card_text(&c, 60, KOTOBA_SHOW_COLOUR);
	assert_memory_equal(text, KOTOBA_TERMINAL_RESET, strlen(KOTOBA_TERMINAL_RESET));
	for (const char *p = strchr(text + strlen(KOTOBA_TERMINAL_RESET), '\033'); p;
	     p = strchr(p + 1, '\033'))
		if (strncmp(p, "\033[7m", 4) && strncmp(p, "\033[27m", 5) &&
		    strncmp(p, "\033[0m", 4) && strncmp(p, "\033[1m", 4) &&
		    strncmp(p, "\033[1;33m", 7))
			fail_msg("a raw escape on the card: '%.10s'", p);
	free(text);
}

static void test_receipt_line(void **state)
{
	static struct kotoba_result r = KOTOBA_RESULT_INIT;
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	assert_int_equal(kotoba_show_receipt(f, &r, 0), 0); /* nothing refused: no line */
	r.blocked_total = 5;
	r.n_blocked = 2;
	r.blocked[0] = (struct kotoba_blocked){ "exec", "/bin/sh", 2, "exec gate", "worker", false };
	r.blocked[1] = (struct kotoba_blocked){ "secret-read", "/h/.ssh/k\x1b[2J\n", 1,
						"mount mask", "python", true };
	assert_int_equal(kotoba_show_receipt(f, &r, 0), 5);
	/* an older caller's result, without the receipt's fields */
	r.size = offsetof(struct kotoba_result, n_blocked);
	assert_int_equal(kotoba_show_receipt(f, &r, 0), 0);
	fclose(f);
	/* what the snippet's interpreter alone reported is its claim, apart */
	assert_string_equal(buf, "kotoba: the sandbox stopped 2 operations: exec /bin/sh x2 "
				 "(exec gate)\n"
				 "kotoba: the snippet itself claims 1 operation was refused (its "
				 "own report, which no witness outside it saw): read "
				 "/h/.ssh/k\\x1b[2J\\x0a (secret)\n"
				 "kotoba: and 2 more refusals, past what a receipt lists\n");
	free(buf);
}

/* After a run that exited 0: a note, and the known probes named; near
 * misses (another program, another argv[0], another address) are not. */
static void test_receipt_of_a_run_that_succeeded(void **state)
{
	static struct kotoba_result r = KOTOBA_RESULT_INIT;
	static const struct kotoba_blocked b[] = {
		{ "exec", "/usr/bin/uname (argv[0] uname)", 1, "exec gate", "worker", false },
		{ "exec", "/usr/bin/unamex", 1, "exec gate", "worker", false },
		{ "exec", "/bin/uname (argv[0] sh)", 1, "exec gate", "worker", false },
		{ "exec", "/usr/local/bin/fc-list", 1, "exec gate", "worker", false },
		{ "bind", "::1:0", 1, "seccomp", "python", true },
		{ "bind", "::1:80", 1, "seccomp", "python", true },
	};
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	(void)state;
	r.exited = true;
	r.exit_code = 0;
	r.blocked_total = 6;
	r.n_blocked = 6;
	memcpy(r.blocked, b, sizeof(b));
	assert_int_equal(kotoba_show_receipt(f, &r, 0), 6);
	fclose(f);
	assert_string_equal(buf, "kotoba: note: the run succeeded; the sandbox refused 4 "
				 "operations, which the program handled: exec /usr/bin/uname "
				 "(argv[0] uname) (exec gate: platform.uname's processor probe), "
				 "exec /usr/bin/unamex (exec gate), exec /bin/uname (argv[0] sh) "
				 "(exec gate), exec /usr/local/bin/fc-list (exec gate: "
				 "matplotlib's font list probe)\n"
				 "kotoba: the snippet itself claims 2 operations were refused (its "
				 "own report, which no witness outside it saw): bind ::1:0 "
				 "(seccomp: urllib3's IPv6 probe), bind ::1:80 (seccomp)\n");
	free(buf);
}

static void test_card_of_an_empty_snippet(void **state)
{
	struct kotoba_card c = card_of("");
	char *text = kotoba_card_text(&c, 80, 0);

	(void)state;
	assert_non_null(strstr(text, "(the snippet is empty)"));
	free(text);
}

/* An escalation card: the first run's audit row and receipt, every target
 * made visible, the snippet's own reports marked, the two options. */
static void test_escalation_card(void **state)
{
	static const struct kotoba_blocked blocked[] = {
		{ "write", "/home/ada/project/notes.md", 1, "landlock", "python", true },
		{ "exec", "/bin/sh\x1b[2J\xe2\x80\xae", 2, "exec gate", "worker", false },
		{ "secret-read", "/home/ada/.ssh/id_ed25519", 1, "mount mask", "worker", false },
	};
	struct kotoba_card c = card_of("open('notes.md', 'w')\n");
	char *text;

	(void)state;
	c.labels = NULL;
	c.n_labels = 0;
	c.family = c.family_button = c.family_detail = NULL;
	c.reason = "This snippet already ran once under your execute_code grant; run it again?";
	c.escalate = true;
	c.blocked = blocked;
	c.n_blocked = 3;
	c.blocked_total = 6;
	c.after_seq = 41;
	text = kotoba_card_text(&c, 80, 0);
	assert_non_null(text);
	assert_non_null(strstr(text, "== The sandbox stopped this snippet: run it again? ==\n"));
	assert_non_null(strstr(text, "again?\n"));
	assert_null(strstr(text, "?."));
	/* the interpreter's report is the snippet's claim, counted apart */
	assert_non_null(strstr(text, "First run:   audit row #41; the sandbox stopped 5 operations "
				     "in it, and the\n             snippet claims 1 more\n"));
	assert_non_null(strstr(text, "Stopped:     write /home/ada/project/notes.md (landlock, the "
				     "snippet's own\n             claim: no witness outside it saw "
				     "this)\n"));
	assert_non_null(strstr(text, "             exec /bin/sh\\x1b[2J<U+202E> x2 (exec gate)\n"));
	assert_non_null(strstr(text, "             read /home/ada/.ssh/id_ed25519 (secret)\n"));
	assert_non_null(strstr(text, "             and 2 more\n"));
	assert_non_null(strstr(text, "the lines above contain 3 invisible or control characters"));
	assert_non_null(strstr(text, "\n   1  open('notes.md', 'w')\n"));
	assert_non_null(strstr(text, "\n  [r] Run it again with your permissions (the approved "
				     "profile)\n  [l] Leave it: nothing runs again\n"));
	assert_null(strstr(text, "[o]"));
	assert_null(strchr(text, '\033'));
	assert_rows_fit(text, 80);
	free(text);
	text = kotoba_card_text(&c, 60, 0);
	assert_non_null(text);
	assert_rows_fit(text, 60);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_text_is_unchanged),
		cmocka_unit_test(test_receipt_line),
		cmocka_unit_test(test_receipt_of_a_run_that_succeeded),
		cmocka_unit_test(test_controls_are_shown),
		cmocka_unit_test(test_invisible_code_points_are_shown),
		cmocka_unit_test(test_bytes_that_are_not_utf8_are_shown),
		cmocka_unit_test(test_tabs_and_lines),
		cmocka_unit_test(test_combining_marks_do_not_stack),
		cmocka_unit_test(test_card_shows_every_line_numbered),
		cmocka_unit_test(test_card_shows_what_the_client_set),
		cmocka_unit_test(test_card_wraps_long_lines_and_counts_escapes),
		cmocka_unit_test(test_card_of_an_empty_snippet),
		cmocka_unit_test(test_escalation_card),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
