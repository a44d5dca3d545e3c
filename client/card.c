/* SPDX-License-Identifier: MIT
 * The approval card in a terminal: the whole snippet with line numbers,
 * the pre-screen's labels marked at their lines, and the three choices in
 * the spec's words.  The answer is read from the controlling terminal, not
 * stdin, which may be the snippet itself.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client/card.h"

struct style {
	const char *bold, *warn, *dim, *off;
};

static const char *label_at_line(const struct msg_card *m, uint64_t line)
{
	for (size_t i = 0; i < m->n_labels; i++)
		if (m->labels[i].line == line)
			return m->labels[i].label;
	return NULL;
}

static void show_snippet(FILE *out, const struct msg_card *m, const struct style *st)
{
	const char *p = m->snippet.ptr, *end = p + m->snippet.len;
	uint64_t line = 1;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		const char *label = label_at_line(m, line);

		fprintf(out, "%s%4llu%s %s%.*s%s", st->dim, (unsigned long long)line, st->off,
			label ? st->warn : "", (int)len, p, label ? st->off : "");
		if (label)
			fprintf(out, "   %s<- %s%s", st->warn, label, st->off);
		fputc('\n', out);
		p += len + (nl ? 1 : 0);
		line++;
	}
}

static void show_card(FILE *out, const struct msg_card *m, bool colour)
{
	static const struct style plain = { "", "", "", "" };
	static const struct style ansi = { "\033[1m", "\033[1;33m", "\033[2m", "\033[0m" };
	const struct style *st = colour ? &ansi : &plain;

	fprintf(out, "\n%s== Approval needed: run this Python snippet? ==%s\n", st->bold, st->off);
	fprintf(out, "Why: %.*s.\n", (int)m->reason.len, m->reason.ptr);
	if (m->n_labels) {
		fprintf(out, "Pre-screen:");
		for (size_t i = 0; i < m->n_labels; i++)
			fprintf(out, " %s%s%s (line %llu)", st->warn, m->labels[i].label, st->off,
				(unsigned long long)m->labels[i].line);
		fputc('\n', out);
	}
	fputc('\n', out);
	show_snippet(out, m, st);
	fprintf(out, "\n  [o] Run once\n"
		     "  [a] %s\n"
		     "      %s\n"
		     "  [d] Deny\n",
		CARD_FAMILY_BUTTON, CARD_FAMILY_DETAIL);
}

static const char *read_choice(FILE *tty)
{
	char line[64];

	for (;;) {
		fputs("Your choice [o/a/d]: ", tty);
		fflush(tty);
		if (!fgets(line, sizeof(line), tty))
			return "deny";
		if (line[0] == 'o' || line[0] == 'O')
			return "once";
		if (line[0] == 'a' || line[0] == 'A')
			return "always";
		if (line[0] == 'd' || line[0] == 'D')
			return "deny";
	}
}

static const char *ask_terminal(const struct msg_card *m)
{
	FILE *tty = fopen("/dev/tty", "r+");
	const char *choice;

	if (!tty) {
		cli_error("an approval card needs an answer, and there is no terminal to ask "
			  "on (%s); answering deny.\n"
			  "  Answer non-interactively with --answer once|always|deny, or declare "
			  "no approval channel with --no-channel.", strerror(errno));
		return "deny";
	}
	show_card(tty, m, true);
	choice = read_choice(tty);
	fclose(tty);
	return choice;
}

int card_answer(struct conn *c, const struct msg *msg, const char *preset, bool quiet)
{
	const struct msg_card *m = &msg->u.card;
	struct msg_answer a = { .card = m->card };
	struct frame f;

	if (preset) {
		a.choice = preset;
		if (!quiet)
			cli_error("card %.*s answered %s (--answer)", (int)m->card.len, m->card.ptr,
				  preset);
	} else {
		a.choice = ask_terminal(m);
	}
	if (enc_answer(&f, &a) < 0)
		return -1;
	return conn_send(c, &f);
}
