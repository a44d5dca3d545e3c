/* SPDX-License-Identifier: MIT
 * The snippet's environment.  It is built here from three sources only:
 * fixed values, the snippet user's passwd entry, and the names on the
 * allowlist below taken from the client's `exec` request.  The broker's own
 * environment is never read, so a secret exported to the daemon cannot
 * reach a snippet.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker/broker.h"
#include "broker/privsep.h"

#define SNIPPET_PATH "/usr/local/bin:/usr/bin:/bin"

/* What a client may pass through: locale, terminal shape and a plotting
 * backend.  Nothing here can name a credential, and nothing here decides
 * which code runs (see refused[] below). */
static const char *const allowed[] = {
	"LANG",	       "LANGUAGE",    "LC_ALL",	    "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES",
	"LC_MONETARY", "LC_NUMERIC",  "LC_TIME",    "TZ",	"TERM",	      "COLUMNS",
	"LINES",       "NO_COLOR",    "VIRTUAL_ENV", "MPLBACKEND", NULL,
};

/* Names that decide which code runs, in python3's own process or in a
 * program the snippet starts.  A card could show the name and the value,
 * never the code they make run, so a client that sends one is refused
 * before any card (an error, not a silent drop: the client expected the
 * code to change).  A trailing '*'
 * makes an entry a prefix.  The allowlist above decides what passes; this
 * list only decides what is an error, and it beats the allowlist. */
static const char *const refused[] = {
	"PYTHON*",	  /* python3's switches: PYTHONPATH, PYTHONSTARTUP, PYTHONHOME,
			   * PYTHONINSPECT, PYTHONUSERBASE, PYTHONWARNINGS,
			   * PYTHONBREAKPOINT... (python3 -I ignores them anyway) */
	"LD_*",		  /* the dynamic loader: LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT */
	"GCONV_PATH",	  /* iconv modules: shared objects glibc loads */
	"GLIBC_TUNABLES", /* the loader's and malloc's tunables */
	"MALLOC_*",	  /* malloc's older switches */
	"LOCPATH",	  /* locale files glibc parses, from a path of the client's */
	"NLSPATH",	  /* message catalogues, likewise */
	"OPENSSL_*",	  /* OPENSSL_CONF loads engines and providers (shared objects)
			   * when `ssl` is imported */
	"BASH_ENV",	  /* startup code for the shell behind os.system and
			   * subprocess(shell=True) */
	"ENV",		  /* likewise, for sh */
	"PERL5OPT",	  "PERL5LIB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS",
	NULL,
};

static bool name_matches(const char *entry, const char *name, size_t len)
{
	size_t n = strlen(entry);

	if (n > 0 && entry[n - 1] == '*')
		return len >= n - 1 && !memcmp(entry, name, n - 1);
	return n == len && !memcmp(entry, name, len);
}

bool env_name_refused(const char *name, size_t len)
{
	for (size_t i = 0; refused[i]; i++)
		if (name_matches(refused[i], name, len))
			return true;
	return false;
}

/* Even an allowlisted name is dropped if it looks like it holds a secret:
 * the allowlist may grow, this rule must keep holding. */
static const char *const secret_words[] = {
	"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", NULL,
};

static bool name_looks_secret(const char *name, size_t len)
{
	char up[129];

	if (len >= sizeof(up))
		return true;
	for (size_t i = 0; i < len; i++)
		up[i] = (char)toupper((unsigned char)name[i]);
	up[len] = '\0';
	for (size_t i = 0; secret_words[i]; i++)
		if (strstr(up, secret_words[i]))
			return true;
	return false;
}

bool env_name_allowed(const char *name, size_t len)
{
	if (name_looks_secret(name, len) || env_name_refused(name, len))
		return false;
	for (size_t i = 0; allowed[i]; i++)
		if (strlen(allowed[i]) == len && !memcmp(allowed[i], name, len))
			return true;
	return false;
}

static int push(char **out, size_t *n, const char *name, size_t nlen, const char *value,
		size_t vlen)
{
	char *s;

	if (*n >= ENV_OUT_MAX - 4) /* room for the worker's TMPDIR and friends */
		return -E2BIG;
	if (asprintf(&s, "%.*s=%.*s", (int)nlen, name, (int)vlen, value) < 0)
		return -ENOMEM;
	out[(*n)++] = s;
	return 0;
}

static bool requested(const struct env_pair *req, size_t n_req, const char *name)
{
	for (size_t i = 0; i < n_req; i++)
		if (pstr_eq(req[i].name, name))
			return true;
	return false;
}

static int push_fixed(const struct identity *id, const struct env_pair *req, size_t n_req,
		      char **out, size_t *n)
{
	int rc;

#define FIXED(name, value) push(out, n, name, strlen(name), value, strlen(value))
	if ((rc = FIXED("PATH", SNIPPET_PATH)) < 0 || (rc = FIXED("HOME", id->home)) < 0 ||
	    (rc = FIXED("USER", id->name)) < 0 || (rc = FIXED("LOGNAME", id->name)) < 0 ||
	    (rc = FIXED("SHELL", id->shell)) < 0)
		return rc;
	/* Python decodes its streams by the locale: default to UTF-8 unless
	 * the client chose a locale. */
	if (!requested(req, n_req, "LANG") && !requested(req, n_req, "LC_ALL") &&
	    (rc = FIXED("LANG", "C.UTF-8")) < 0)
		return rc;
#undef FIXED
	return 0;
}

/* matplotlib imports a backend named `module://name`: code the card does
 * not show.  Its built-in backends ("Agg", "svg"...) are plain names. */
static bool value_imports_code(const struct env_pair *e)
{
	static const char prefix[] = "module:";

	return pstr_eq(e->name, "MPLBACKEND") && e->value.len >= sizeof(prefix) - 1 &&
	       !strncasecmp(e->value.ptr, prefix, sizeof(prefix) - 1);
}

int env_check_request(const struct env_pair *req, size_t n_req, char *err, size_t errlen)
{
	for (size_t i = 0; i < n_req; i++) {
		const struct pstr *nm = &req[i].name;

		if (env_name_refused(nm->ptr, nm->len)) {
			snprintf(err, errlen,
				 "exec: env '%.*s' is refused: it changes which code runs, code "
				 "no card shows (python3 runs isolated; a snippet that needs "
				 "another sys.path says so in its code)",
				 (int)(nm->len > 64 ? 64 : nm->len), nm->ptr);
			return -EPERM;
		}
		if (value_imports_code(&req[i])) {
			snprintf(err, errlen,
				 "exec: env MPLBACKEND may name a built-in backend only, not a "
				 "module to import");
			return -EPERM;
		}
	}
	return 0;
}

int env_build(const struct identity *id, const struct env_pair *req, size_t n_req, char **out,
	      size_t *n_out, char *err, size_t errlen)
{
	int rc;

	*n_out = 0;
	rc = push_fixed(id, req, n_req, out, n_out);
	for (size_t i = 0; rc == 0 && i < n_req; i++) {
		if (!env_name_allowed(req[i].name.ptr, req[i].name.len))
			continue;
		rc = push(out, n_out, req[i].name.ptr, req[i].name.len, req[i].value.ptr,
			  req[i].value.len);
	}
	if (rc < 0) {
		if (!err[0])
			snprintf(err, errlen, "could not build the environment: %s", strerror(-rc));
		env_free(out, *n_out);
		*n_out = 0;
	}
	return rc;
}

void env_free(char **env, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(env[i]);
}
