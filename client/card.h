/* SPDX-License-Identifier: MIT
 * The approval card in a terminal.
 */
#ifndef KOTOBA_CARD_H
#define KOTOBA_CARD_H
#include "client/cli.h"
/* Shows the card and sends the answer: `preset` (from --answer) when given,
 * else the person's choice at the terminal, else `deny`. */
int card_answer(struct conn *c, const struct msg *card, const char *preset, bool quiet);
#endif
