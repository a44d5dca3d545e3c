/* SPDX-License-Identifier: MIT
 * The approval card in a terminal.
 */
#ifndef KOTOBA_CARD_H
#define KOTOBA_CARD_H
#include "client/cli.h"
/* Shows the card and returns the answer: `preset` (from --answer) when
 * given, else the person's choice at the terminal, else deny. */
enum kotoba_choice card_answer(const struct kotoba_card *card, const char *preset, bool quiet);
#endif
