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

static const char *label_at_line(const struct kotoba_card *m, uint64_t line)
{
	for (size_t i = 0; i < m->n_labels; i++)
		if (m->labels[i].line == line)
			return m->labels[i].label;
	return NULL;
}

static void show_snippet(FILE *out, const struct kotoba_card *m, const struct style *st)
{
	const char *p = m->snippet, *end = p + m->snippet_len;
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

static void show_card(FILE *out, const struct kotoba_card *m, bool colour)
{
	static const struct style plain = { "", "", "", "" };
	static const struct style ansi = { "\033[1m", "\033[1;33m", "\033[2m", "\033[0m" };
	const struct style *st = colour ? &ansi : &plain;

	fprintf(out, "\n%s== Approval needed: run this Python snippet? ==%s\n", st->bold, st->off);
	fprintf(out, "Why: %s.\n", m->reason);
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
		m->family_button, m->family_detail);
}

static enum kotoba_choice read_choice(FILE *tty)
{
	char line[64];

	for (;;) {
		fputs("Your choice [o/a/d]: ", tty);
		fflush(tty);
		if (!fgets(line, sizeof(line), tty))
			return KOTOBA_CARD_DENY;
		if (line[0] == 'o' || line[0] == 'O')
			return KOTOBA_CARD_ONCE;
		if (line[0] == 'a' || line[0] == 'A')
			return KOTOBA_CARD_ALWAYS;
		if (line[0] == 'd' || line[0] == 'D')
			return KOTOBA_CARD_DENY;
	}
}

static enum kotoba_choice ask_terminal(const struct kotoba_card *m)
{
	FILE *tty = fopen("/dev/tty", "r+");
	enum kotoba_choice choice;

	if (!tty) {
		cli_error("an approval card needs an answer, and there is no terminal to ask "
			  "on (%s); answering deny.\n"
			  "  Answer non-interactively with --answer once|always|deny, or declare "
			  "no approval channel with --no-channel.", strerror(errno));
		return KOTOBA_CARD_DENY;
	}
	show_card(tty, m, true);
	choice = read_choice(tty);
	fclose(tty);
	return choice;
}

static enum kotoba_choice choice_of(const char *word)
{
	if (!strcmp(word, "once"))
		return KOTOBA_CARD_ONCE;
	if (!strcmp(word, "always"))
		return KOTOBA_CARD_ALWAYS;
	return KOTOBA_CARD_DENY;
}

enum kotoba_choice card_answer(const struct kotoba_card *card, const char *preset, bool quiet)
{
	if (!preset)
		return ask_terminal(card);
	if (!quiet)
		cli_error("card %s answered %s (--answer)", card->id, preset);
	return choice_of(preset);
}
