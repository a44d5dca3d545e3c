/* SPDX-License-Identifier: MIT
 * `kotoba audit verify --db FILE [--key KEY | --key-file FILE] [--anchors FILE]`:
 * checks a copy of the audit database offline (AUDIT.md): the hash chain,
 * with key[0] every seal, with the broker's log every anchor.  Nothing is
 * sent to a broker: the verification key never reaches the machine's
 * service user.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/seal.h"
#include "broker/store.h"
#include "client/cli.h"

#define ANCHOR_TAG "audit-anchor seq="
#define ANCHORS_MAX (1u << 20)

struct verify_opts {
	const char *db, *key, *key_file, *anchors;
};

bool audit_verify_offline(int argc, char **argv)
{
	static const char *const names[] = { "--db", "--key", "--key-file", "--anchors" };

	for (int i = 1; i < argc; i++)
		for (size_t j = 0; j < sizeof(names) / sizeof(names[0]); j++)
			if (!strncmp(argv[i], names[j], strlen(names[j])) &&
			    (argv[i][strlen(names[j])] == '\0' || argv[i][strlen(names[j])] == '='))
				return true;
	return false;
}

static int usage(void)
{
	fputs("usage: kotoba audit verify [--socket PATH]\n"
	      "       kotoba audit verify --db FILE [--key KEY | --key-file FILE|-]"
	      " [--anchors FILE]\n", stderr);
	return KOTOBA_EXIT_USAGE;
}

static int parse(int argc, char **argv, struct verify_opts *o)
{
	static const struct option lo[] = {
		{ "db", required_argument, NULL, 'd' },
		{ "key", required_argument, NULL, 'k' },
		{ "key-file", required_argument, NULL, 'f' },
		{ "anchors", required_argument, NULL, 'a' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		const char **slot = c == 'd' ? &o->db : c == 'k' ? &o->key :
				    c == 'f' ? &o->key_file : c == 'a' ? &o->anchors : NULL;

		if (!slot || *slot || !optarg[0])
			return -1;
		*slot = optarg;
	}
	if (optind != argc - 1 || strcmp(argv[optind], "verify") || !o->db ||
	    (o->key && o->key_file))
		return -1;
	return 0;
}

static int read_key_file(const char *path, struct seal_key *k)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	char line[200] = "";
	int rc;

	if (!f) {
		cli_error("cannot open the key file %s: %s", path, strerror(errno));
		return -1;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	if (f != stdin)
		fclose(f);
	rc = seal_key_parse(line, 0, k);
	explicit_bzero(line, sizeof(line));
	return rc;
}

static int get_key(const struct verify_opts *o, struct seal_key *k)
{
	int rc;

	if (o->key_file)
		rc = read_key_file(o->key_file, k);
	else
		rc = seal_key_parse(o->key, 0, k);
	if (rc)
		cli_error("the key must be the 64 hex digits --audit-key-init printed");
	return rc;
}

/* One anchor from a log line, wherever the line's prefix ends. */
static bool parse_anchor(const char *line, struct audit_anchor *a)
{
	const char *p = strstr(line, ANCHOR_TAG);
	char *end;

	if (!p)
		return false;
	p += sizeof(ANCHOR_TAG) - 1;
	if (*p < '0' || *p > '9')
		return false;
	errno = 0;
	a->seq = strtoll(p, &end, 10);
	if (errno || strncmp(end, " hash=", 6))
		return false;
	end += 6;
	for (int i = 0; i < 64; i++)
		if (!((end[i] >= '0' && end[i] <= '9') || (end[i] >= 'a' && end[i] <= 'f')))
			return false;
	if (end[64] && end[64] != ' ' && end[64] != '\n')
		return false;
	memcpy(a->hash, end, 64);
	a->hash[64] = '\0';
	return true;
}

static int read_anchors(const char *path, struct audit_anchor **out, size_t *n)
{
	FILE *f = fopen(path, "re");
	struct audit_anchor a, *v = NULL;
	size_t cap = 0, len = 0;
	char *line = NULL;

	*n = 0;
	if (!f) {
		cli_error("cannot open the anchors file %s: %s", path, strerror(errno));
		return -1;
	}
	while (getline(&line, &len, f) > 0) {
		if (!parse_anchor(line, &a))
			continue;
		if (*n == cap) {
			struct audit_anchor *w = cap < ANCHORS_MAX ?
				realloc(v, (cap ? 2 * cap : 64) * sizeof(*v)) : NULL;

			if (!w)
				break;
			v = w;
			cap = cap ? 2 * cap : 64;
		}
		v[(*n)++] = a;
	}
	free(line);
	fclose(f);
	*out = v;
	return 0;
}

static const char *kind_name(enum audit_problem_kind k)
{
	switch (k) {
	case AUDIT_CHAIN: return "chain";
	case AUDIT_SEAL: return "seal";
	case AUDIT_ANCHOR: return "anchor";
	default: return "?";
	}
}

static void print_report(const char *db, const struct audit_report *r, bool anchors)
{
	printf("%s: rows %" PRId64 " to %" PRId64 " (%" PRIu64 " rows), head row %" PRId64
	       " hash %s\n", db, r->first_seq, r->last_seq, r->rows, r->head_seq, r->head_hash);
	printf("chain: %s\n", r->chain_problems ? "BROKEN" : "intact");
	if (!r->sealed && !r->seals_checked)
		printf("seals: rows are not sealed (no key was ever set up)\n");
	else if (!r->seals_checked)
		printf("seals: not checked (no --key); %" PRIu64 " rows sealed from row %" PRId64 "\n",
		       r->sealed, r->first_sealed);
	else
		printf("seals: %s; %" PRIu64 " rows sealed from row %" PRId64 ", keys 0 to %" PRId64
		       "\n", r->seal_problems ? "BROKEN" : "every seal verifies", r->sealed,
		       r->first_sealed, r->last_key_index);
	if (anchors)
		printf("anchors: %s; %" PRIu64 " match\n", r->anchor_problems ? "BROKEN" :
		       "every anchor matches", r->anchors_ok);
	else
		printf("anchors: not checked (no --anchors)\n");
	for (size_t i = 0; i < r->n; i++) {
		printf("%s at row %" PRId64 ": %s", kind_name(r->problems[i].kind),
		       r->problems[i].seq, r->problems[i].why);
		if (r->problems[i].acked_by)
			printf(" (recorded by the broker in epoch row %" PRId64 ")",
			       r->problems[i].acked_by);
		putchar('\n');
	}
	if (r->dropped)
		printf("... and %zu more\n", r->dropped);
}

static int check_copy(const struct verify_opts *o, struct seal_key *key)
{
	static struct audit_report rep;
	struct audit_check opt = { .key = key };
	struct store *s;
	char err[800];
	int rc = 1;

	if (o->anchors && read_anchors(o->anchors, &opt.anchors, &opt.n_anchors) < 0)
		return 1;
	if (store_open_copy(o->db, &s, err, sizeof(err)) < 0) {
		cli_error("%s", err);
	} else {
		if (store_audit_check(s, &opt, &rep) < 0)
			cli_error("%s", store_last_error(s));
		else {
			print_report(o->db, &rep, o->anchors != NULL);
			rc = rep.chain_problems || rep.seal_problems || rep.anchor_problems;
		}
		store_close(s);
	}
	free(opt.anchors);
	return rc;
}

int cmd_audit_verify_copy(int argc, char **argv)
{
	struct verify_opts o = { 0 };
	struct seal_key key;
	bool have_key;
	int rc;

	if (parse(argc, argv, &o) < 0)
		return usage();
	have_key = o.key || o.key_file;
	if (have_key && get_key(&o, &key) < 0)
		return KOTOBA_EXIT_USAGE;
	rc = check_copy(&o, have_key ? &key : NULL);
	seal_key_wipe(&key);
	return rc;
}
