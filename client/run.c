/* SPDX-License-Identifier: MIT
 * `kotoba run`: send one snippet, stream its output, exit with its status.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/card.h"
#include "client/cli.h"

/* Names the CLI forwards from its own environment; the broker applies its
 * own allowlist on top, so this list is a convenience, not a control.  No
 * PYTHON* name: the broker refuses those (they change which code runs). */
static const char *const forwarded[] = { "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
					 "VIRTUAL_ENV", NULL };

struct run_opts {
	const char *code_arg, *file, *cwd, *socket, *answer;
	uint64_t timeout_ms;
	bool json, no_channel;
	bool raw_output;            /* --raw-output: bytes as written, on a terminal too */
	uint64_t for_ms;            /* --for: an always grant's life; 0: as long as allowed */
	char *scope;                /* --scope, resolved; NULL: any directory */
	const char *output_dir;     /* --output-dir: where the run's files are saved */
};

struct buf {
	char *p;
	size_t len, cap;
};

/* The start of a UTF-8 character whose last bytes are in the next output
 * frame, held until they come. */
struct held {
	unsigned char b[4];
	size_t n;
};

struct outcome {
	bool have_exit;
	/* A person answered this run's card at the terminal (once, always, or
	 * run it again): they read the code, and its output is theirs as
	 * written.  Until then it is shown made visible on a terminal. */
	bool read_by_person;
	struct held held[2];
	struct kotoba_result exit;
	struct kotoba_error err; /* when !have_exit: why it did not run */
	struct buf out[2];
	/* An escalation: the first run's result and (--json) output; how the
	 * card ended. */
	enum kotoba_escalation escalation;
	struct kotoba_result first;
	struct buf first_out[2];
	const struct run_opts *o;
	struct kotoba_client *c;
	/* The files the snippet left in $KOTOBA_OUTPUT_DIR: --output-dir's
	 * directory, opened once, and for --json what came and where it went. */
	int dir_fd;
	json_t *files;
	size_t n_files;
};

static void usage_run(FILE *f)
{
	fputs("usage: kotoba run [-c CODE | FILE | -] [--cwd DIR] [--timeout SECONDS]\n"
	      "                  [--socket PATH] [--json] [--no-channel] [--raw-output]\n"
	      "                  [--answer once|always|deny] [--for DURATION] [--scope DIR]\n"
	      "                  [--output-dir DIR]\n", f);
}

static int buf_add(struct buf *b, const void *p, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		size_t cap = (b->len + len + 1) * 2;
		char *n = realloc(b->p, cap);

		if (!n)
			return -ENOMEM;
		b->p = n;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
	return 0;
}

static int read_code(const struct run_opts *o, struct buf *code)
{
	FILE *f;
	char chunk[65536];
	size_t n;

	if (o->code_arg)
		return buf_add(code, o->code_arg, strlen(o->code_arg));
	f = strcmp(o->file, "-") ? fopen(o->file, "rb") : stdin;
	if (!f) {
		cli_error("cannot read %s: %s", o->file, strerror(errno));
		return -1;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (buf_add(code, chunk, n) < 0)
			break;
	if (ferror(f))
		cli_error("reading %s failed", o->file);
	if (f != stdin)
		fclose(f);
	return 0;
}

static int parse_timeout(const char *s, uint64_t *ms)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || v <= 0 || v > 86400)
		return -1;
	*ms = (uint64_t)(v * 1000);
	return 0;
}

static int parse_run_args(int argc, char **argv, struct run_opts *o)
{
	static const struct option lo[] = {
		{ "cwd", required_argument, NULL, 'C' },
		{ "timeout", required_argument, NULL, 't' },
		{ "socket", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "no-channel", no_argument, NULL, 'n' },
		{ "raw-output", no_argument, NULL, 'R' },
		{ "answer", required_argument, NULL, 'a' },
		{ "for", required_argument, NULL, 'F' },
		{ "scope", required_argument, NULL, 's' },
		{ "output-dir", required_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool seen[256] = { false };
	int c;

	while ((c = getopt_long(argc, argv, "c:h", lo, NULL)) != -1) {
		if (!cli_option_once(c, lo, seen) || (c == 'S' && !cli_socket_fits(optarg)))
			return usage_run(stderr), -1;
		if (c == 'c')
			o->code_arg = optarg;
		else if (c == 'C')
			o->cwd = optarg;
		else if (c == 't' && parse_timeout(optarg, &o->timeout_ms) < 0)
			return cli_error("--timeout takes seconds, e.g. 30 or 0.5"), -1;
		else if (c == 'S')
			o->socket = optarg;
		else if (c == 'j')
			o->json = true;
		else if (c == 'n')
			o->no_channel = true;
		else if (c == 'R')
			o->raw_output = true;
		else if (c == 'a')
			o->answer = optarg;
		else if (c == 'O')
			o->output_dir = optarg;
		else if (c == 'F' && !card_duration(optarg, &o->for_ms))
			return cli_error("--for takes a duration: a number with ms, s, m, h or d "
					 "after it, e.g. 8h"), -1;
		else if (c == 's' && !(o->scope = realpath(optarg, NULL)))
			return cli_error("--scope %s: %s", optarg, strerror(errno)), -1;
		else if (c == 'h')
			return usage_run(stdout), exit(0), -1;
		else if (c != 't' && c != 'F' && c != 's')
			return usage_run(stderr), -1;
	}
	if (optind < argc)
		o->file = argv[optind++];
	if (optind < argc || !!o->code_arg == !!o->file) {
		cli_error(o->code_arg && o->file ? "give -c CODE or a FILE, not both"
						 : "give the snippet: -c CODE, a FILE, or - for stdin");
		return usage_run(stderr), -1;
	}
	if (o->answer && strcmp(o->answer, "once") && strcmp(o->answer, "always") &&
	    strcmp(o->answer, "deny"))
		return cli_error("--answer takes once, always or deny"), -1;
	/* A grant's terms with a preset answer that saves none would read as
	 * if something had been limited. */
	if ((o->for_ms || o->scope) && o->answer && strcmp(o->answer, "always"))
		return cli_error("--for and --scope go with --answer always (or an always "
				 "chosen on the card)"), -1;
	return 0;
}

/* "NAME=value" entries of the CLI's own environment for the names above. */
static void forward_env(const char **env)
{
	extern char **environ;
	size_t n = 0;

	for (size_t i = 0; forwarded[i]; i++) {
		size_t len = strlen(forwarded[i]);

		for (char **e = environ; e && *e; e++) {
			if (!strncmp(*e, forwarded[i], len) && (*e)[len] == '=') {
				env[n++] = *e;
				break;
			}
		}
	}
	env[n] = NULL;
}

/* How many bytes at the end of p start a UTF-8 character that is not
 * whole yet (0 to 3). */
static size_t cut_character(const unsigned char *p, size_t n)
{
	for (size_t k = 1; k <= 3 && k <= n; k++) {
		unsigned char c = p[n - k];
		size_t need;

		if ((c & 0xc0) == 0x80)
			continue;
		need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
		return need > k ? k : 0;
	}
	return 0;
}

/* Output that reaches a terminal from a run nobody read: its escape and
 * control sequences are input to the terminal the next card is drawn on,
 * so they are shown as the card shows a snippet (kotoba_show). */
static bool shown_visible(const struct outcome *oc, FILE *f)
{
	return !oc->o->raw_output && !oc->read_by_person && isatty(fileno(f));
}

static void show_output(struct held *h, FILE *f, const void *data, size_t len)
{
	unsigned char *all = malloc(h->n + len);
	size_t n = h->n + len, keep;

	if (!all) {
		kotoba_show(f, (const char *)h->b, h->n, KOTOBA_SHOW_LINES | KOTOBA_SHOW_COLOUR);
		kotoba_show(f, data, len, KOTOBA_SHOW_LINES | KOTOBA_SHOW_COLOUR);
		h->n = 0;
		return;
	}
	memcpy(all, h->b, h->n);
	memcpy(all + h->n, data, len);
	keep = cut_character(all, n);
	kotoba_show(f, (const char *)all, n - keep, KOTOBA_SHOW_LINES | KOTOBA_SHOW_COLOUR);
	memcpy(h->b, all + n - keep, keep);
	h->n = keep;
	free(all);
}

/* A character still cut when the run ends is shown as the bytes it is. */
static void show_output_end(struct outcome *oc)
{
	for (int i = 0; i < 2; i++) {
		FILE *f = i ? stderr : stdout;

		if (oc->held[i].n)
			kotoba_show(f, (const char *)oc->held[i].b, oc->held[i].n,
				    KOTOBA_SHOW_LINES | KOTOBA_SHOW_COLOUR);
		oc->held[i].n = 0;
		fflush(f);
	}
}

/* A new file in --output-dir's directory, by its descriptor: never over an
 * existing file, never through a symlink put there (O_EXCL, O_NOFOLLOW).
 * The name is plain (the library refused any other). */
static bool save_file(struct outcome *oc, const char *name, const void *data, size_t len)
{
	int fd = openat(oc->dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			0644);
	bool ok = fd >= 0 && write(fd, data, len) == (ssize_t)len;

	if (!ok)
		cli_error("cannot save %s in %s: %s", name, oc->o->output_dir, strerror(errno));
	if (fd >= 0 && close(fd) < 0 && ok) {
		cli_error("cannot save %s in %s: %s", name, oc->o->output_dir, strerror(errno));
		ok = false;
	}
	return ok;
}

static void on_file(void *arg, const char *name, const void *data, size_t len)
{
	struct outcome *oc = arg;
	bool saved = oc->dir_fd >= 0 && save_file(oc, name, data, len);
	json_t *f;

	oc->n_files++;
	if (!oc->files)
		return;
	f = json_object();
	json_object_set_new(f, "name", json_string(name));
	json_object_set_new(f, "size", json_integer((json_int_t)len));
	json_object_set_new(f, "mime_type", json_string(kotoba_mime_type(data, len)));
	json_object_set_new(f, "saved", json_boolean(saved));
	json_array_append_new(oc->files, f);
}

static void on_output(void *arg, enum kotoba_stream stream, const void *data, size_t len)
{
	struct outcome *oc = arg;
	FILE *f = stream == KOTOBA_STDERR ? stderr : stdout;

	if (oc->o->json) {
		buf_add(&oc->out[stream == KOTOBA_STDERR], data, len);
		return;
	}
	if (shown_visible(oc, f))
		show_output(&oc->held[stream == KOTOBA_STDERR], f, data, len);
	else
		fwrite(data, 1, len, f);
	fflush(f);
}

/* The first run is over when its escalation card comes: what the sandbox
 * stopped in it is said then, after its output, before the card; its
 * output (--json) is kept apart from the re-run's.  Only the person at
 * the terminal answers it, never --answer. */
static enum kotoba_choice on_escalation(struct outcome *oc, const struct kotoba_card *card)
{
	enum kotoba_choice choice;

	kotoba_escalation(oc->c, NULL, NULL, &oc->first, NULL);
	oc->escalation = KOTOBA_ESCALATION_RERUN;
	oc->first_out[0] = oc->out[0];
	oc->first_out[1] = oc->out[1];
	memset(oc->out, 0, sizeof(oc->out));
	show_output_end(oc);
	kotoba_show_receipt(stderr, &oc->first, 0);
	choice = card_answer(card, NULL, oc->o->json, NULL);
	oc->read_by_person = choice == KOTOBA_CARD_RERUN;
	if (choice == KOTOBA_CARD_RERUN && !oc->o->json)
		cli_error("running it again with your permissions (the approved profile)");
	return choice;
}

/* An `always` with terms is sent from here; the library is told it was
 * deferred, so it sends nothing of its own. */
static enum kotoba_choice on_card(void *arg, const struct kotoba_card *card)
{
	struct outcome *oc = arg;
	struct kotoba_grant_terms t = KOTOBA_GRANT_TERMS_INIT;
	struct kotoba_error err = KOTOBA_ERROR_INIT;
	enum kotoba_choice choice;

	if (card->escalate)
		return on_escalation(oc, card);

	t.for_ms = oc->o->for_ms;
	t.scope = oc->o->scope;
	choice = card_answer(card, oc->o->answer, oc->o->json, &t.for_ms);
	oc->read_by_person = !oc->o->answer &&
			     (choice == KOTOBA_CARD_ONCE || choice == KOTOBA_CARD_ALWAYS);
	if (choice != KOTOBA_CARD_ALWAYS || (!t.for_ms && !t.scope))
		return choice;
	if (card->grant_ttl_ms && t.for_ms > card->grant_ttl_ms) {
		char asked[32], most[32];

		kotoba_duration_text(t.for_ms, asked, sizeof(asked));
		kotoba_duration_text(card->grant_ttl_ms, most, sizeof(most));
		cli_error("the grant lasts %s, the most the broker allows ([gate] grant_ttl), "
			  "not the %s asked", most, asked);
	}
	if (kotoba_answer_always(oc->c, card->id, &t, &err)) {
		cli_error("%s", err.message);
		return KOTOBA_CARD_DENY;
	}
	return KOTOBA_CARD_DEFER;
}

static void on_notice(void *arg, const struct kotoba_error *notice)
{
	cli_error("broker: %s", notice->message);
}

/* Sends the exec and follows it to its end.  Returns 0 when the outcome
 * (an exit or the broker's error) is known, -1 after printing why not. */
static int converse(struct kotoba_client *c, const char *cwd, const struct buf *code,
		    struct outcome *oc)
{
	const char *env[sizeof(forwarded) / sizeof(forwarded[0])];
	struct kotoba_exec_opts x = {
		.size = sizeof(x), .code = code->len ? code->p : "", .code_len = code->len, .cwd = cwd,
		.timeout_ms = oc->o->timeout_ms, .env = env, .on_output = on_output,
		.on_card = on_card, .on_notice = on_notice, .arg = oc, .on_file = on_file,
	};
	enum kotoba_code rc;

	forward_env(env);
	oc->c = c;
	rc = kotoba_exec(c, &x, &oc->exit, &oc->err);
	oc->have_exit = rc == KOTOBA_OK;
	kotoba_escalation(c, &oc->escalation, NULL, NULL, NULL);
	if (rc == KOTOBA_OK || oc->err.from_broker)
		return 0;
	cli_error("%s", oc->err.message);
	return -1;
}

/* Statuses of a run that did not produce an exit (see proto/status.h). */
static int error_status(enum kotoba_code code)
{
	switch (code) {
	case KOTOBA_ERR_SETUP_FAILED:
	case KOTOBA_ERR_BAD_CWD:
		return KOTOBA_EXIT_SETUP;
	case KOTOBA_ERR_NOT_OFFERED:
	case KOTOBA_ERR_REFUSED:
	case KOTOBA_ERR_DENIED:
	case KOTOBA_ERR_EXPIRED:
	case KOTOBA_ERR_SNIPPET_TOO_LARGE:
	case KOTOBA_ERR_CANCELLED:
		return KOTOBA_EXIT_DID_NOT_RUN;
	case KOTOBA_OK:
	case KOTOBA_ERR_UNREACHABLE:
	case KOTOBA_ERR_DISCONNECTED:
	case KOTOBA_ERR_PROTOCOL:
	case KOTOBA_ERR_NOMEM:
	case KOTOBA_ERR_INVALID:
	case KOTOBA_ERR_TOO_LARGE:
	case KOTOBA_ERR_BAD_MSGPACK:
	case KOTOBA_ERR_BAD_UTF8:
	case KOTOBA_ERR_BAD_FIELD:
	case KOTOBA_ERR_UNKNOWN_TYPE:
	case KOTOBA_ERR_BAD_STATE:
	case KOTOBA_ERR_VERSION:
	case KOTOBA_ERR_BUSY:
	case KOTOBA_ERR_NO_SUCH_RUN:
	case KOTOBA_ERR_NO_SUCH_CARD:
	case KOTOBA_ERR_WORKER_LOST:
	case KOTOBA_ERR_AUDIT_UNAVAILABLE:
	case KOTOBA_ERR_AUDIT_BROKEN:
	case KOTOBA_ERR_INTERNAL:
	case KOTOBA_ERR_OTHER:
	default:
		return KOTOBA_EXIT_UNREACHABLE;
	}
}

int run_status(bool have_exit, const struct kotoba_result *r, enum kotoba_code code)
{
	if (!have_exit)
		return error_status(code);
	if (r->timed_out)
		return KOTOBA_EXIT_TIMEOUT;
	if (!r->exited)
		return KOTOBA_EXIT_SIGNAL_BASE + r->signal;
	return r->exit_code & 0xff;
}

/* An escalated run: how its card ended, and the first run as a run of its
 * own (its output and exit); the top level is the re-run after rerun, the
 * first run otherwise. */
static void add_escalation(json_t *o, const struct outcome *oc)
{
	const char *name = json_escalation_name(oc->escalation);
	json_t *first;

	if (!name)
		return;
	first = json_object();
	json_object_set_new(first, "stdout", json_text(oc->first_out[0].p, oc->first_out[0].len));
	json_object_set_new(first, "stderr", json_text(oc->first_out[1].p, oc->first_out[1].len));
	json_add_result(first, &oc->first);
	json_object_set_new(o, "escalation", json_string(name));
	json_object_set_new(o, "first", first);
}

static void print_json(const struct outcome *oc, int status)
{
	bool left = oc->escalation != KOTOBA_ESCALATION_NONE &&
		    oc->escalation != KOTOBA_ESCALATION_RERUN;
	/* Left, expired or withdrawn: the first run is the result, its
	 * output too. */
	const struct buf *out = left ? oc->first_out : oc->out;
	json_t *o = json_object();

	json_object_set_new(o, "stdout", json_text(out[0].p, out[0].len));
	json_object_set_new(o, "stderr", json_text(out[1].p, out[1].len));
	if (oc->have_exit)
		json_add_result(o, &oc->exit);
	else
		json_add_error(o, &oc->err);
	add_escalation(o, oc);
	json_object_set_new(o, "files", json_incref(oc->files));
	json_object_set_new(o, "status", json_integer(status));
	if (json_dumpf(o, stdout, JSON_COMPACT) < 0)
		cli_error("out of memory writing the JSON result");
	putchar('\n');
	json_decref(o);
}

static void report_plain(const struct outcome *oc)
{
	if (oc->escalation == KOTOBA_ESCALATION_LEFT)
		cli_error("left as it was: nothing ran again");
	else if (oc->escalation == KOTOBA_ESCALATION_EXPIRED)
		cli_error("nobody answered the escalation card in time: nothing ran again");
	else if (oc->escalation == KOTOBA_ESCALATION_CANCELLED)
		cli_error("the escalation card was withdrawn: nothing ran again");
	if (!oc->have_exit) {
		cli_error("%s", oc->err.message[0] ? oc->err.message : "the snippet did not run");
		return;
	}
	if (oc->exit.timed_out)
		cli_error("the snippet was stopped after its timeout");
	if (oc->exit.truncated && oc->exit.output_limit)
		cli_error("output was cut at %" PRIu64 " bytes per stream; the broker's [limits] "
			  "output setting raises it", oc->exit.output_limit);
	else if (oc->exit.truncated)
		cli_error("output was cut at the broker's per-stream limit ([limits] output)");
	if (oc->exit.limit[0] && strcmp(oc->exit.limit, "wall"))
		cli_error("the snippet hit its %s limit", oc->exit.limit);
	if (oc->n_files && oc->dir_fd < 0)
		cli_error("the snippet left %zu file%s in KOTOBA_OUTPUT_DIR; --output-dir DIR "
			  "saves them", oc->n_files, oc->n_files == 1 ? "" : "s");
	if (oc->exit.files_left_out)
		cli_error("%" PRIu64 " entr%s of KOTOBA_OUTPUT_DIR not sent: only regular files "
			  "with plain names, at most 16 files, 2 MiB each, 8 MiB in all",
			  oc->exit.files_left_out, oc->exit.files_left_out == 1 ? "y" : "ies");
}

static void outcome_free(struct outcome *oc)
{
	free(oc->out[0].p);
	free(oc->out[1].p);
	free(oc->first_out[0].p);
	free(oc->first_out[1].p);
	json_decref(oc->files);
	if (oc->dir_fd >= 0)
		close(oc->dir_fd);
}

/* Resolves the working directory, connects, and runs the snippet. */
static int run_snippet(const struct run_opts *o, const struct buf *code, struct outcome *oc)
{
	struct kotoba_client *c;
	char cwd[PATH_MAX];
	int rc;

	if (o->cwd ? !realpath(o->cwd, cwd) : !getcwd(cwd, sizeof(cwd))) {
		cli_error("working directory %s: %s", o->cwd ? o->cwd : ".", strerror(errno));
		return KOTOBA_EXIT_USAGE;
	}
	/* Escalation cards are declared only where a person answers cards:
	 * a terminal, and no --answer (which never answers one). */
	rc = cli_open(&c, o->socket,
		      o->no_channel ? 0 :
		      KOTOBA_HELLO_CHANNEL |
		      (!o->answer && card_terminal() ? KOTOBA_HELLO_ESCALATE : 0));
	if (rc == 0 && converse(c, cwd, code, oc) < 0)
		rc = KOTOBA_EXIT_UNREACHABLE;
	kotoba_close(c);
	return rc;
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o = { 0 };
	struct outcome oc = { .o = &o, .exit = KOTOBA_RESULT_INIT, .err = KOTOBA_ERROR_INIT,
			      .first = KOTOBA_RESULT_INIT, .dir_fd = -1 };
	struct buf code = { 0 };
	int status;

	if (parse_run_args(argc, argv, &o) < 0 || read_code(&o, &code) < 0) {
		free(code.p);
		free(o.scope);
		return KOTOBA_EXIT_USAGE;
	}
	if (o.output_dir &&
	    (oc.dir_fd = open(o.output_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		cli_error("--output-dir %s: %s", o.output_dir, strerror(errno));
		free(code.p);
		free(o.scope);
		return KOTOBA_EXIT_USAGE;
	}
	oc.files = o.json ? json_array() : NULL;
	status = run_snippet(&o, &code, &oc);
	show_output_end(&oc);
	if (status == 0) {
		status = run_status(oc.have_exit, &oc.exit, oc.err.code);
		if (o.json)
			print_json(&oc, status);
		else
			report_plain(&oc);
		/* After the output, so that it is the last thing said; an
		 * escalation's first run said it before its card. */
		if (oc.have_exit && (oc.escalation == KOTOBA_ESCALATION_NONE ||
				     oc.escalation == KOTOBA_ESCALATION_RERUN)) {
			fflush(stdout);
			kotoba_show_receipt(stderr, &oc.exit, 0);
		}
	}
	free(code.p);
	free(o.scope);
	outcome_free(&oc);
	return status;
}
