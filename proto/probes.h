/* SPDX-License-Identifier: MIT
 * Refusals that common libraries provoke on purpose, to learn what the
 * system offers, and handle: named for what they are wherever a receipt
 * is shown (the CLI's line, its --json), so that a person reading "exec
 * /usr/bin/uname" after `import pandas` knows it is platform.uname()'s
 * processor probe, not the snippet's doing.  A name only: the entry, its
 * target and its witness are shown as ever, and a snippet can provoke the
 * same refusal itself.
 */
#ifndef KOTOBA_PROTO_PROBES_H
#define KOTOBA_PROTO_PROBES_H

/* The probe a receipt entry (kind, target as PROTOCOL.md "exit" gives
 * them) is, as a short name, or NULL. */
const char *probe_name(const char *kind, const char *target);

#endif
