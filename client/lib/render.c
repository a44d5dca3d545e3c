/* SPDX-License-Identifier: MIT
 * Text for a person's terminal.  Whatever a snippet, a client or the
 * broker wrote is input to the terminal that shows it: one escape sequence
 * moves the cursor over a line of the card, one U+202E reverses what
 * follows, one U+200B hides.  So every character that is not plainly
 * visible text is shown as what it is (`\x1b`, `<U+202E>`), tabs become
 * spaces, and long lines are wrapped with a continuation mark, never cut.
 * The `kotoba` CLI, and any program that links this library, show cards
 * and broker text through here; the Python package has the same rules in
 * kotoba_broker/render.py.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/internal.h"
#include "proto/limits.h"
#include "proto/probes.h"

#define TAB_STOP 8
/* Combining marks after one base character: more than this are shown as
 * code points, since a stack of them can paint over the rows around it. */
#define MARKS_MAX 2

struct range {
	uint32_t lo, hi;
};

/* Code points a terminal shows as nothing, or that change how the text
 * around them is shown: C1 controls, format characters (Unicode's Cf:
 * bidirectional controls, zero-width characters, the BOM, the invisible
 * math operators, Arabic and Syriac marks, tags), variation selectors,
 * fillers that draw as blank but are letters to Python, line and paragraph
 * separators, private-use characters (their look is the font's) and
 * noncharacters (these and U+xFFFE, U+xFFFF of every plane).  With the C0
 * controls this covers Unicode's default-ignorable code points. */
static const struct range hidden[] = {
	{ 0x0080, 0x009f },   { 0x00ad, 0x00ad },   { 0x034f, 0x034f },   { 0x0600, 0x0605 },
	{ 0x061c, 0x061c },   { 0x06dd, 0x06dd },   { 0x070f, 0x070f },   { 0x0890, 0x0891 },
	{ 0x08e2, 0x08e2 },   { 0x115f, 0x1160 },   { 0x17b4, 0x17b5 },   { 0x180b, 0x180f },
	{ 0x200b, 0x200f },   { 0x2028, 0x202e },   { 0x2060, 0x206f },   { 0x3164, 0x3164 },
	{ 0xe000, 0xf8ff },   { 0xfdd0, 0xfdef },   { 0xfe00, 0xfe0f },   { 0xfeff, 0xfeff },
	{ 0xffa0, 0xffa0 },   { 0xfff0, 0xfffb },   { 0x110bd, 0x110bd }, { 0x110cd, 0x110cd },
	{ 0x13430, 0x1343f }, { 0x1bca0, 0x1bca3 }, { 0x1d173, 0x1d17a }, { 0xe0000, 0xe0fff },
	{ 0xf0000, 0x10ffff },
};

/* Combining marks: zero columns (the common blocks; others count as one,
 * which only wraps a row early). */
static const struct range combining[] = {
	{ 0x0300, 0x036f }, { 0x0483, 0x0489 }, { 0x0591, 0x05bd }, { 0x0610, 0x061a },
	{ 0x064b, 0x065f }, { 0x0e31, 0x0e31 }, { 0x0e34, 0x0e3a }, { 0x0e47, 0x0e4e },
	{ 0x1ab0, 0x1aff }, { 0x1dc0, 0x1dff }, { 0x20d0, 0x20ff }, { 0xfe20, 0xfe2f },
};

/* East Asian wide and fullwidth characters and emoji: two columns. */
static const struct range wide[] = {
	{ 0x1100, 0x115e },   { 0x2e80, 0x303e },   { 0x3041, 0x3163 },   { 0x3165, 0x33ff },
	{ 0x3400, 0x4dbf },   { 0x4e00, 0x9fff },   { 0xa000, 0xa4cf },   { 0xac00, 0xd7a3 },
	{ 0xf900, 0xfaff },   { 0xfe30, 0xfe4f },   { 0xff00, 0xff60 },   { 0xffe0, 0xffe6 },
	{ 0x1f300, 0x1f64f }, { 0x1f900, 0x1f9ff }, { 0x20000, 0x3fffd },
};

static bool in(const struct range *r, size_t n, uint32_t cp)
{
	for (size_t i = 0; i < n; i++)
		if (cp >= r[i].lo && cp <= r[i].hi)
			return true;
	return false;
}

#define IN(table, cp) in(table, sizeof(table) / sizeof(table[0]), cp)

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_next(const uint8_t *p, size_t n, uint32_t *cp)
{
	size_t k = p[0] < 0x80 ? 1 : p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
	static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };

	if (!k || k > n || p[0] > 0xf4)
		return 0;
	*cp = k == 1 ? p[0] : p[0] & (0x7fu >> k);
	for (size_t i = 1; i < k; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (p[i] & 0x3fu);
	}
	if (*cp < min[k] || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
		return 0;
	return k;
}

/* Where text goes: a stream, the column the cursor is at, and how a row
 * that continues a wrapped one begins. */
struct pen {
	FILE *f;
	unsigned width;   /* columns; 0: never wrap */
	unsigned col;
	char cont[24];    /* starts a continuation row */
	unsigned cont_cols;
	unsigned origin;  /* the column tab stops count from */
	bool words;       /* prose: wrap at a space, not inside a word */
	bool colour;
	unsigned marks;   /* combining marks since the last base character */
	size_t escaped;   /* characters shown as escapes so far */
};

/* Starts a continuation row when `cols` more would pass the width. */
static void pen_room(struct pen *p, unsigned cols)
{
	if (!p->width || p->col + cols <= p->width || p->col <= p->cont_cols)
		return;
	fputc('\n', p->f);
	fputs(p->cont, p->f);
	p->col = p->cont_cols;
}

static void pen_put(struct pen *p, const void *s, size_t len, unsigned cols)
{
	pen_room(p, cols);
	fwrite(s, 1, len, p->f);
	p->col += cols;
}

/* An escape, in reverse video where there is colour, so that `\x1b` the
 * byte can be told from the four characters a snippet may contain. */
static void pen_escape(struct pen *p, bool byte, uint32_t v)
{
	char s[16];
	int n = byte ? snprintf(s, sizeof(s), "\\x%02" PRIx32, v)
		     : snprintf(s, sizeof(s), "<U+%04" PRIX32 ">", v);

	pen_room(p, (unsigned)n);
	fprintf(p->f, "%s%s%s", p->colour ? "\033[7m" : "", s, p->colour ? "\033[27m" : "");
	p->col += (unsigned)n;
	p->escaped++;
}

/* In prose, a space before a word that would not fit ends the row
 * instead (a word longer than half the row is cut where it must be). */
static bool wrap_before_word(struct pen *p, const uint8_t *u, size_t len)
{
	size_t n = 0, chars = 0;

	while (n < len && u[n] != ' ' && u[n] != '\n')
		chars += (u[n++] & 0xc0) != 0x80;
	if (!p->width || p->col + 1 + chars <= p->width || chars >= p->width / 2)
		return false;
	pen_room(p, p->width);
	return true;
}

/* Writes s; a newline ends the row when `lines`, else it is escaped too. */
static void pen_text(struct pen *p, const char *s, size_t len, bool lines)
{
	const uint8_t *u = (const uint8_t *)s;
	size_t i = 0, k;
	uint32_t cp = 0;

	while (i < len) {
		if (p->words && u[i] == ' ' && wrap_before_word(p, u + i + 1, len - i - 1)) {
			i++;
			continue;
		}
		if (u[i] >= 0x20 && u[i] < 0x7f) { /* printable ASCII: most of any code */
			pen_put(p, u + i++, 1, 1);
			p->marks = 0;
			continue;
		}
		k = utf8_next(u + i, len - i, &cp);
		if (!k) {
			pen_escape(p, true, u[i++]);
			p->marks = 0;
			continue;
		}
		if (cp == '\n' && lines) {
			fputc('\n', p->f);
			p->col = 0;
		} else if (cp == '\t') {
			unsigned n = TAB_STOP - (p->col - p->origin) % TAB_STOP;

			pen_put(p, "        ", n, n);
		} else if (cp < 0x20 || cp == 0x7f) {
			pen_escape(p, true, cp);
		} else if (IN(hidden, cp) || (cp & 0xfffe) == 0xfffe ||
			   (IN(combining, cp) && p->marks >= MARKS_MAX)) {
			pen_escape(p, false, cp);
		} else if (IN(combining, cp)) {
			p->marks++;
			fwrite(u + i, 1, k, p->f);
		} else {
			pen_put(p, u + i, k, IN(wide, cp) ? 2 : 1);
		}
		if (!IN(combining, cp))
			p->marks = 0;
		i += k;
	}
}

/* A card's string, which a hand-made card may leave NULL. */
static void pen_str(struct pen *p, const char *s)
{
	if (s)
		pen_text(p, s, strlen(s), false);
}

size_t kotoba_show(FILE *out, const char *s, size_t len, unsigned flags)
{
	struct pen p = { .f = out, .colour = flags & KOTOBA_SHOW_COLOUR };

	if (s)
		pen_text(&p, s, len, flags & KOTOBA_SHOW_LINES);
	return p.col;
}

/* ---- the card ---------------------------------------------------------------- */

static const char *label_at(const struct kotoba_card *c, uint64_t line)
{
	for (size_t i = 0; i < c->n_labels; i++)
		if (c->labels[i].line == line)
			return c->labels[i].label;
	return NULL;
}

static unsigned digits(uint64_t n)
{
	unsigned d = 1;

	while (n >= 10) {
		n /= 10;
		d++;
	}
	return d;
}

static uint64_t count_lines(const char *s, size_t len)
{
	uint64_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += s[i] == '\n';
	/* The newline that ends the last line starts no new one. */
	return n + (len && s[len - 1] != '\n');
}

/* One line of the snippet: its number, its text wrapped at the width with
 * a `+` in the number's column on each continuation row, its label. */
static void snippet_line(struct pen *p, const struct kotoba_card *c, uint64_t no, unsigned w,
			 const char *s, size_t len)
{
	const char *label = label_at(c, no);
	const char *warn = p->colour && label ? "\033[1;33m" : "";

	snprintf(p->cont, sizeof(p->cont), "%*s+ ", (int)w, "");
	p->cont_cols = p->origin = w + 2;
	p->words = false;
	p->col = (unsigned)fprintf(p->f, "%*" PRIu64 "  %s", (int)w, no, warn) - (unsigned)strlen(warn);
	p->marks = 0;
	pen_text(p, s, len, false);
	if (label) {
		pen_room(p, 6 + (unsigned)strlen(label));
		fputs("   <- ", p->f);
		p->col += 6;
		pen_str(p, label);
	}
	fprintf(p->f, "%s\n", warn[0] ? "\033[0m" : "");
}

/* Every line, numbered from 1 as the broker counts them (at each \n). */
static void show_snippet(struct pen *p, const struct kotoba_card *c)
{
	const char *s = c->snippet, *end = s + c->snippet_len;
	unsigned w = digits(count_lines(s, c->snippet_len));
	uint64_t no = 1;

	if (w < 4)
		w = 4;
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);

		snippet_line(p, c, no++, w, s, len);
		s += len + (nl ? 1 : 0);
	}
	if (!c->snippet_len)
		fputs("      (the snippet is empty)\n", p->f);
}

/* A labelled field: `Name: value`, the value wrapped under itself; at
 * words for prose, anywhere for a value shown exactly (a path, an env
 * value), so that no space of it is taken for the row's end. */
static void field(struct pen *p, const char *name, const char *value, bool words)
{
	p->col = (unsigned)fprintf(p->f, "%-13s", name);
	snprintf(p->cont, sizeof(p->cont), "%13s", "");
	p->cont_cols = p->origin = 13;
	p->words = words;
	if (value)
		pen_text(p, value, strlen(value), false);
}

/* 4294967296 -> "4 GiB"; a value that is not a whole unit stays in bytes. */
static void put_size(FILE *f, uint64_t v)
{
	static const char *const unit[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	size_t u = 0;

	while (u < 4 && v && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	fprintf(f, "%" PRIu64 " %s", v, unit[u]);
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n > t && !strcmp(s + n - t, tail);
}

/* "cpu 600 s, memory 4 GiB, ...": the names are the broker's, shown with
 * their unit suffix turned into the unit. */
static void put_limits(struct pen *p, const struct kotoba_card *c)
{
	for (size_t i = 0; i < c->n_limits; i++) {
		const char *n = c->limits[i].name;
		size_t len = strlen(n) - (ends_with(n, "_bytes") ? 6 : ends_with(n, "_s") ? 2 : 0);
		char *s = NULL, *q;
		size_t sl = 0;
		FILE *f = open_memstream(&s, &sl);

		if (!f)
			return;
		fprintf(f, "%s%.*s ", i ? ", " : "", (int)len, n);
		if (ends_with(n, "_bytes"))
			put_size(f, c->limits[i].value);
		else
			fprintf(f, "%" PRIu64 "%s", c->limits[i].value, ends_with(n, "_s") ? " s" : "");
		fclose(f);
		for (q = s; *q; q++)
			if (*q == '_')
				*q = ' ';
		pen_text(p, s, sl, false);
		free(s);
	}
}

/* What the client chose that changes what runs. */
static void show_settings(struct pen *p, const struct kotoba_card *c)
{
	char t[64];

	field(p, "Runs in:", c->cwd ? c->cwd : "(the broker did not say)", !c->cwd);
	fputc('\n', p->f);
	/* python3 starts isolated, then appends the working directory to
	 * sys.path (PYTHON_SNIPPET_MAIN): the code may import what is there. */
	field(p, "Imports:", CARD_IMPORTS, true);
	fputc('\n', p->f);
	if (c->timeout_ms)
		snprintf(t, sizeof(t), "%" PRIu64 ".%03" PRIu64 " s wall clock", c->timeout_ms / 1000,
			 c->timeout_ms % 1000);
	field(p, "Time limit:", c->timeout_ms ? t : "(the broker did not say)", true);
	fputc('\n', p->f);
	if (c->n_limits) {
		field(p, "Limits:", NULL, true);
		put_limits(p, c);
		fputc('\n', p->f);
	}
	field(p, "Environment:", c->n_env ? NULL : "nothing from the client", true);
	fputc('\n', p->f);
	for (size_t i = 0; i < c->n_env; i++) {
		field(p, "", c->env[i].name, false);
		pen_text(p, "=", 1, false);
		pen_str(p, c->env[i].value);
		fputc('\n', p->f);
	}
}

/* An entry only the snippet's own interpreter reported: the snippet could
 * have made it up, or left out what it did not want said. */
static bool claimed(const struct kotoba_blocked *b)
{
	return !strncmp(b->seen_by, "python", sizeof(b->seen_by));
}

/* The word an entry starts with: its kind, `read` for a masked secret's,
 * none for a request the egress proxy refused (its target is the proxy's
 * sentence, which starts with the method). */
static const char *kind_word(const struct kotoba_blocked *b)
{
	if (!strcmp(b->kind, "secret-read"))
		return "read";
	return strcmp(b->kind, "request") ? b->kind : "";
}

static void pen_kind(struct pen *p, const struct kotoba_blocked *b)
{
	const char *kind = kind_word(b);

	if (!*kind)
		return;
	pen_text(p, kind, strnlen(kind, sizeof(b->kind)), false);
	pen_text(p, " ", 1, false);
}

/* How a receipt entry reads: `write /w/notes.md x2 (landlock)`, a read of
 * a masked secret as `read PATH (secret)`, and an entry the snippet's own
 * interpreter reported marked as such: the snippet could have forged it. */
static void blocked_entry(struct pen *p, const struct kotoba_blocked *b)
{
	bool secret = !strcmp(b->kind, "secret-read");
	const char *by = secret && !strcmp(b->by, "mount mask") ? "secret" : b->by;
	char n[32];

	pen_kind(p, b);
	pen_text(p, b->target, strnlen(b->target, sizeof(b->target)), false);
	if (b->count > 1) {
		snprintf(n, sizeof(n), " x%" PRIu64, b->count);
		pen_text(p, n, strlen(n), false);
	}
	pen_text(p, " (", 2, false);
	pen_text(p, by, strnlen(by, sizeof(b->by)), false);
	if (claimed(b)) {
		p->words = true; /* the card's own words: wrapped as prose */
		pen_str(p, ", the snippet's own claim: no witness outside it saw this");
		p->words = false;
	}
	pen_text(p, ")", 1, false);
}

/* An escalation card's first run: its audit row and its receipt, one
 * entry a row. */
static void show_first_run(struct pen *p, const struct kotoba_card *c)
{
	uint64_t listed = 0;
	char s[128];

	uint64_t claims = 0;

	for (size_t i = 0; c->blocked && i < c->n_blocked && i < KOTOBA_BLOCKED_MAX; i++)
		claims += claimed(&c->blocked[i]) ? c->blocked[i].count : 0;
	snprintf(s, sizeof(s), "audit row #%" PRIu64 "; the sandbox stopped %" PRIu64
		 " operation%s in it", c->after_seq, c->blocked_total - claims,
		 c->blocked_total - claims == 1 ? "" : "s");
	if (claims)
		snprintf(s + strlen(s), sizeof(s) - strlen(s), ", and the snippet claims %" PRIu64
			 " more", claims);
	field(p, "First run:", s, true);
	fputc('\n', p->f);
	for (size_t i = 0; c->blocked && i < c->n_blocked && i < KOTOBA_BLOCKED_MAX; i++) {
		field(p, i ? "" : "Stopped:", NULL, false);
		blocked_entry(p, &c->blocked[i]);
		fputc('\n', p->f);
		listed += c->blocked[i].count;
	}
	if (listed < c->blocked_total) {
		snprintf(s, sizeof(s), "and %" PRIu64 " more", c->blocked_total - listed);
		field(p, c->n_blocked ? "" : "Stopped:", s, true);
		fputc('\n', p->f);
	}
}

/* The reason, ended with a full stop unless it has its own. */
static void show_reason(struct pen *p, const struct kotoba_card *c)
{
	size_t n = c->reason ? strlen(c->reason) : 0;

	field(p, "Why:", c->reason, true);
	fputs(n && strchr(".?!", c->reason[n - 1]) ? "\n" : ".\n", p->f);
}

static void show_head(struct pen *p, const struct kotoba_card *c)
{
	const char *bold = p->colour ? "\033[1m" : "", *off = p->colour ? "\033[0m" : "";

	if (c->escalate) {
		fprintf(p->f, "\n%s== The sandbox stopped this snippet: run it again? ==%s\n",
			bold, off);
		show_reason(p, c);
		show_first_run(p, c);
		show_settings(p, c);
		return;
	}
	fprintf(p->f, "\n%s== Approval needed: run this Python snippet? ==%s\n", bold, off);
	field(p, "Why:", c->reason, true);
	fputs(".\n", p->f);
	if (c->n_labels) {
		field(p, "Pre-screen:", NULL, true);
		for (size_t i = 0; i < c->n_labels; i++) {
			char at[128];
			int n = snprintf(at, sizeof(at), "%s%s (line %" PRIu64 ")", i ? ", " : "",
					 c->labels[i].label ? c->labels[i].label : "",
					 c->labels[i].line);

			pen_text(p, at, n < 0 ? 0 : (size_t)n < sizeof(at) ? (size_t)n : sizeof(at) - 1,
				 false);
		}
		fputc('\n', p->f);
	}
	show_settings(p, c);
}

static void show_options(struct pen *p, const struct kotoba_card *c)
{
	if (c->escalate) {
		fputs("\n  [r] ", p->f);
		snprintf(p->cont, sizeof(p->cont), "      ");
		p->cont_cols = p->origin = 6;
		p->words = true;
		p->col = 6;
		pen_str(p, "Run it again with your permissions (the approved profile)");
		fputs("\n  [l] ", p->f);
		p->col = 6;
		pen_str(p, "Leave it: nothing runs again");
		fputc('\n', p->f);
		return;
	}
	fputs("\n  [o] Run once\n  [a] ", p->f);
	snprintf(p->cont, sizeof(p->cont), "      ");
	p->cont_cols = p->origin = 6;
	p->words = true;
	p->col = 6;
	pen_str(p, c->family_button);
	fputs("\n      ", p->f);
	p->col = 6;
	pen_str(p, c->family_detail);
	fputs("\n  [d] Deny\n", p->f);
}

/* The snippet first, into its own buffer, so the head can say what it
 * contains before the person reads it. */
static char *render_snippet(const struct kotoba_card *c, unsigned width, bool colour,
			    size_t *escaped)
{
	char *s = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&s, &len);
	struct pen p = { .f = f, .width = width, .colour = colour };

	if (!f)
		return NULL;
	show_snippet(&p, c);
	if (fclose(f)) {
		free(s);
		return NULL;
	}
	*escaped = p.escaped;
	return s;
}

/* A sentence of the card's own, wrapped at the width like the rest. */
static void note(struct pen *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct pen *p, const char *fmt, ...)
{
	char s[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s, sizeof(s), fmt, ap);
	va_end(ap);
	p->cont[0] = '\0';
	p->cont_cols = p->origin = p->col = 0;
	p->words = true;
	pen_text(p, s, n < 0 ? 0 : (size_t)n < sizeof(s) ? (size_t)n : sizeof(s) - 1, true);
}

static void show_counts(struct pen *p, const struct kotoba_card *c, size_t escaped)
{
	uint64_t lines = count_lines(c->snippet, c->snippet_len);
	size_t head = p->escaped;

	if (head)
		note(p, "\nNote: the lines above contain %zu invisible or control character%s, "
			"shown as \\xNN or <U+XXXX>.\n", head, head == 1 ? "" : "s");
	if (escaped)
		note(p, "\nNote: this snippet contains %zu invisible or control character%s, "
			"shown as \\xNN or <U+XXXX>%s.\n", escaped, escaped == 1 ? "" : "s",
		     p->colour ? " in reverse video" : "");
	note(p, "\nThe snippet: %" PRIu64 " line%s, %zu bytes, every line shown.\n", lines,
	     lines == 1 ? "" : "s", c->snippet_len);
}

char *kotoba_card_text(const struct kotoba_card *card, unsigned width, unsigned flags)
{
	bool colour = flags & KOTOBA_SHOW_COLOUR;
	char *out = NULL, *snippet;
	size_t len = 0, escaped = 0;
	struct pen p = { .width = width, .colour = colour };

	if (!card || !card->snippet)
		return NULL;
	snippet = render_snippet(card, width, colour, &escaped);
	if (!snippet)
		return NULL;
	p.f = open_memstream(&out, &len);
	if (!p.f) {
		free(snippet);
		return NULL;
	}
	if (colour) /* for a terminal: drawn on one that nothing earlier restyled */
		fputs(KOTOBA_TERMINAL_RESET, p.f);
	show_head(&p, card);
	show_counts(&p, card, escaped);
	fputs(snippet, p.f);
	show_options(&p, card);
	free(snippet);
	if (fclose(p.f)) {
		free(out);
		return NULL;
	}
	return out;
}

void kotoba_duration_text(uint64_t ms, char *out, size_t len)
{
	duration_text(ms, out, len);
}

/* ---- the receipt ------------------------------------------------------------ */

static void show_blocked(FILE *out, const struct kotoba_blocked *b, unsigned flags)
{
	bool secret = !strcmp(b->kind, "secret-read");
	const char *kind = kind_word(b);
	const char *by = secret && !strcmp(b->by, "mount mask") ? "secret" : b->by;
	char target[sizeof(b->target)];
	const char *probe;

	snprintf(target, sizeof(target), "%.*s", (int)strnlen(b->target, sizeof(b->target)),
		 b->target);
	probe = probe_name(b->kind, target);

	if (*kind) {
		kotoba_show(out, kind, strnlen(kind, sizeof(b->kind)), flags);
		fputc(' ', out);
	}
	kotoba_show(out, b->target, strnlen(b->target, sizeof(b->target)), flags);
	if (b->count > 1)
		fprintf(out, " x%" PRIu64, b->count);
	fputs(" (", out);
	kotoba_show(out, by, strnlen(by, sizeof(b->by)), flags);
	if (probe)
		fprintf(out, ": %s", probe);
	fputc(')', out);
}

/* The entries the sandbox's witnesses saw, or (claims) those only the
 * snippet reported: written `, `-separated unless out is NULL; returns
 * how many refusals they count. */
static uint64_t entries(FILE *out, const struct kotoba_blocked *b, size_t n, bool claims,
			unsigned flags)
{
	uint64_t count = 0;

	for (size_t i = 0; i < n; i++) {
		if (claimed(&b[i]) != claims)
			continue;
		if (out && count)
			fputs(", ", out);
		if (out)
			show_blocked(out, &b[i], flags);
		count += b[i].count;
	}
	return count;
}

uint64_t kotoba_show_receipt(FILE *out, const struct kotoba_result *res, unsigned flags)
{
	uint64_t seen, claims, unlisted;
	size_t n;

	if (!res || res->size < KC_SIZE_THROUGH(kotoba_result, blocked) ||
	    !res->blocked_total)
		return 0;
	flags &= ~KOTOBA_SHOW_LINES;
	n = res->n_blocked < KOTOBA_BLOCKED_MAX ? res->n_blocked : KOTOBA_BLOCKED_MAX;
	seen = entries(NULL, res->blocked, n, false, flags);
	claims = entries(NULL, res->blocked, n, true, flags);
	unlisted = res->blocked_total > seen + claims ? res->blocked_total - seen - claims : 0;
	/* A run that succeeded handled what was refused: said as a note. */
	if (seen && res->exited && res->exit_code == 0) {
		fprintf(out, "kotoba: note: the run succeeded; the sandbox refused %" PRIu64
			" operation%s, which the program handled: ", seen, seen == 1 ? "" : "s");
		entries(out, res->blocked, n, false, flags);
		fputc('\n', out);
	} else if (seen) {
		fprintf(out, "kotoba: the sandbox stopped %" PRIu64 " operation%s: ", seen,
			seen == 1 ? "" : "s");
		entries(out, res->blocked, n, false, flags);
		fputc('\n', out);
	}
	if (claims) {
		fprintf(out, "kotoba: the snippet itself claims %" PRIu64 " operation%s %s "
			"refused (its own report, which no witness outside it saw): ", claims,
			claims == 1 ? "" : "s", claims == 1 ? "was" : "were");
		entries(out, res->blocked, n, true, flags);
		fputc('\n', out);
	}
	if (unlisted)
		fprintf(out, "kotoba: and %" PRIu64 " more refusal%s, past what a receipt lists\n",
			unlisted, unlisted == 1 ? "" : "s");
	return res->blocked_total;
}

/* ---- a file's type by its magic bytes ------------------------------------ */

static bool starts(const unsigned char *p, size_t len, const char *magic, size_t n)
{
	return len >= n && !memcmp(p, magic, n);
}

/* Past white space, and past the first @end after a prefix @what. */
static const unsigned char *skip_past(const unsigned char *p, const unsigned char *e,
				      const char *what, const char *end)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	if (!starts(p, (size_t)(e - p), what, strlen(what)))
		return p;
	p = memmem(p, (size_t)(e - p), end, strlen(end));
	return p ? p + strlen(end) : e;
}

static bool is_svg(const unsigned char *p, size_t len)
{
	const unsigned char *e = p + (len < 4096 ? len : 4096), *prev = NULL;

	p = skip_past(p, e, "<?xml", "?>");
	while (p != prev) {
		prev = p;
		p = skip_past(p, e, "<!--", "-->");
		p = skip_past(p, e, "<!DOCTYPE", ">");
	}
	return starts(p, (size_t)(e - p), "<svg", 4);
}

const char *kotoba_mime_type(const void *data, size_t len)
{
	const unsigned char *p = data;

	if (starts(p, len, "\x89PNG\r\n\x1a\n", 8))
		return "image/png";
	if (starts(p, len, "\xff\xd8\xff", 3))
		return "image/jpeg";
	if (starts(p, len, "GIF87a", 6) || starts(p, len, "GIF89a", 6))
		return "image/gif";
	if (len >= 12 && starts(p, len, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4))
		return "image/webp";
	return is_svg(p, len) ? "image/svg+xml" : "application/octet-stream";
}
