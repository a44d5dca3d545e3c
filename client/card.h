/* SPDX-License-Identifier: MIT
 * The approval card in a terminal.
 */
#ifndef KOTOBA_CARD_H
#define KOTOBA_CARD_H
#include "client/cli.h"
/* Shows the card and returns the answer: `preset` (from --answer) when
 * given, else the person's choice at the terminal, else deny.  An
 * escalation card is only ever answered at the terminal (rerun or leave),
 * whatever the preset; without one it is left.  An
 * `always` chosen at the terminal asks how long the grant lasts and sets
 * *for_ms (0: as long as the broker allows); a preset leaves it. */
enum kotoba_choice card_answer(const struct kotoba_card *card, const char *preset, bool quiet,
			       uint64_t *for_ms);
/* Whether the CLI has a terminal to show cards on and read answers from
 * (/dev/tty opens): then, without --answer, its hello declares escalation
 * cards too. */
bool card_terminal(void);
/* What an escalation card asks, after the card itself. */
#define CARD_ESCALATION_PROMPT "[r]un it again with your permissions, or [l]eave it: "
/* "8h", "30m", "90s", "250ms", "2d", or plain seconds, as the broker's
 * config reads durations; false when it is none of them or zero. */
bool card_duration(const char *s, uint64_t *ms);
#endif
