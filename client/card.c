/* SPDX-License-Identifier: MIT
 * The approval card in a terminal, as libkotoba-client formats it
 * (kotoba_card_text: every line numbered, nothing passed raw to the
 * terminal), paged so that every row of it is on the screen at least once
 * before the question is asked.  The answer is read from the controlling
 * terminal, not stdin, which may be the snippet itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "client/card.h"

/* A line read from the terminal; false at end of input. */
static bool read_line(FILE *tty, char *line, size_t len)
{
	return fgets(line, (int)len, tty) != NULL;
}

/* Prints the card a screenful at a time: the rows of one page, then a
 * prompt; the person presses Enter for the next.  Returns false when the
 * terminal closed before the end. */
static bool page(FILE *tty, const char *text, unsigned rows)
{
	unsigned per_page = rows > 4 ? rows - 2 : 2, shown = 0, total = 0;
	char line[64];

	for (const char *p = text; *p; p++)
		total += *p == '\n';
	while (*text) {
		const char *nl = strchr(text, '\n');
		size_t len = nl ? (size_t)(nl - text) + 1 : strlen(text);

		if (shown && shown % per_page == 0) {
			fprintf(tty, "-- rows %u-%u of %u shown; press Enter for more --",
				shown - per_page + 1, shown, total);
			fflush(tty);
			if (!read_line(tty, line, sizeof(line)))
				return false;
		}
		fwrite(text, 1, len, tty);
		text += len;
		shown++;
	}
	return true;
}

/* The person's answer: the first letter of a line, either case, names a
 * choice; anything else asks again.  The end of input takes the choice
 * that runs nothing (deny, or leave on an escalation card). */
struct prompt {
	const char *question;
	const char *letters;
	enum kotoba_choice choices[3];
	enum kotoba_choice at_end;
};

static enum kotoba_choice read_choice(FILE *tty, const struct kotoba_card *m)
{
	static const struct prompt run = { "Your choice [o/a/d]: ", "oad",
		{ KOTOBA_CARD_ONCE, KOTOBA_CARD_ALWAYS, KOTOBA_CARD_DENY }, KOTOBA_CARD_DENY };
	static const struct prompt escalation = { CARD_ESCALATION_PROMPT, "rl",
		{ KOTOBA_CARD_RERUN, KOTOBA_CARD_LEAVE }, KOTOBA_CARD_LEAVE };
	const struct prompt *p = m->escalate ? &escalation : &run;
	char line[64];
	const char *at;

	for (;;) {
		fputs(p->question, tty);
		fflush(tty);
		if (!read_line(tty, line, sizeof(line)))
			return p->at_end;
		if (line[0] && (at = strchr(p->letters, line[0] | 0x20)))
			return p->choices[at - p->letters];
	}
}

bool card_duration(const char *s, uint64_t *ms)
{
	static const struct { const char *suffix; uint64_t ms; } units[] = {
		{ "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
		{ "d", 86400000 },
	};
	uint64_t n = 0;
	const char *p = s;

	for (; *p >= '0' && *p <= '9'; p++)
		if (__builtin_mul_overflow(n, 10, &n) || __builtin_add_overflow(n, *p - '0', &n))
			return false;
	if (p == s)
		return false;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(p, units[i].suffix))
			return !__builtin_mul_overflow(n, units[i].ms, ms) && *ms > 0;
	return false;
}

/* How long an `always` grant lasts: Enter for as long as the broker
 * allows (until revoked, or its grant_ttl), or a duration. */
static uint64_t read_grant_life(FILE *tty, const struct kotoba_card *m)
{
	char line[64], ttl[64] = "until you revoke it";
	uint64_t ms;

	if (m->grant_ttl_ms)
		kotoba_duration_text(m->grant_ttl_ms, ttl, sizeof(ttl));
	for (;;) {
		fprintf(tty, "For how long? Enter: %s%s; or less, e.g. 8h or 30m: ",
			ttl, m->grant_ttl_ms ? ", the most this computer allows" : "");
		fflush(tty);
		if (!read_line(tty, line, sizeof(line)))
			return 0;
		line[strcspn(line, "\r\n")] = '\0';
		if (!line[0])
			return 0;
		if (card_duration(line, &ms))
			return ms;
		fputs("  a duration is a number with ms, s, m, h or d after it\n", tty);
	}
}

static void screen_size(FILE *tty, unsigned *cols, unsigned *rows)
{
	struct winsize ws = { 0 };

	*cols = 80;
	*rows = 24;
	if (ioctl(fileno(tty), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20 && ws.ws_row >= 5) {
		*cols = ws.ws_col;
		*rows = ws.ws_row;
	}
}

static void reset_terminal(void)
{
	FILE *tty = fopen("/dev/tty", "w");

	if (tty) {
		fputs(KOTOBA_TERMINAL_RESET, tty);
		fclose(tty);
	}
}

static void once_at_exit_reset(void)
{
	static bool registered;

	if (!registered)
		registered = atexit(reset_terminal) == 0;
}

static enum kotoba_choice ask_terminal(const struct kotoba_card *m, uint64_t *for_ms)
{
	FILE *tty = fopen("/dev/tty", "r+");
	enum kotoba_choice safe = m->escalate ? KOTOBA_CARD_LEAVE : KOTOBA_CARD_DENY;
	enum kotoba_choice choice = safe;
	unsigned cols, rows;
	char *text;

	if (!tty && m->escalate) {
		cli_error("an escalation card needs a person's answer, and there is no terminal "
			  "to ask on (%s); leaving it: nothing runs again", strerror(errno));
		return KOTOBA_CARD_LEAVE;
	}
	if (!tty) {
		cli_error("an approval card needs an answer, and there is no terminal to ask "
			  "on (%s); answering deny.\n"
			  "  Answer non-interactively with --answer once|always|deny, or declare "
			  "no approval channel with --no-channel.", strerror(errno));
		return KOTOBA_CARD_DENY;
	}
	/* The card's text starts with KOTOBA_TERMINAL_RESET: what an earlier
	 * snippet printed may have left colours, another screen, hidden text
	 * or another character set behind.  What this run prints next may do
	 * the same: the terminal is put back once more when the CLI exits. */
	once_at_exit_reset();
	screen_size(tty, &cols, &rows);
	text = kotoba_card_text(m, cols, KOTOBA_SHOW_COLOUR);
	if (!text)
		cli_error("out of memory showing the card; answering %s",
			  kotoba_choice_name(safe));
	else if (page(tty, text, rows))
		choice = read_choice(tty, m);
	if (choice == KOTOBA_CARD_ALWAYS)
		*for_ms = read_grant_life(tty, m);
	free(text);
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

bool card_terminal(void)
{
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

enum kotoba_choice card_answer(const struct kotoba_card *card, const char *preset, bool quiet,
			       uint64_t *for_ms)
{
	/* --answer never answers an escalation card: nothing runs again
	 * without a person. */
	if (!preset || card->escalate)
		return ask_terminal(card, for_ms);
	if (!quiet)
		cli_error("card %s answered %s (--answer)", card->id, preset);
	return choice_of(preset);
}
