/* SPDX-License-Identifier: MIT
 * Errors as values: a code, the protocol's word for it, and a sentence.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client/lib/internal.h"

/* Indexed by enum kotoba_code: fixed words for the local errors... */
static const char *const names[] = {
	[KOTOBA_OK] = "ok",
	[KOTOBA_ERR_UNREACHABLE] = "unreachable",
	[KOTOBA_ERR_DISCONNECTED] = "disconnected",
	[KOTOBA_ERR_PROTOCOL] = "protocol",
	[KOTOBA_ERR_NOMEM] = "nomem",
	[KOTOBA_ERR_INVALID] = "invalid",
	[KOTOBA_ERR_OTHER] = "other",
};

/* ...and for the broker's, their code in the protocol's table
 * (proto/names.h), whose string is what the broker sends. */
static const enum proto_errcode wire[] = {
	[KOTOBA_ERR_TOO_LARGE] = PE_TOO_LARGE,
	[KOTOBA_ERR_BAD_MSGPACK] = PE_BAD_MSGPACK,
	[KOTOBA_ERR_BAD_UTF8] = PE_BAD_UTF8,
	[KOTOBA_ERR_BAD_FIELD] = PE_BAD_FIELD,
	[KOTOBA_ERR_UNKNOWN_TYPE] = PE_UNKNOWN_TYPE,
	[KOTOBA_ERR_BAD_STATE] = PE_BAD_STATE,
	[KOTOBA_ERR_VERSION] = PE_VERSION,
	[KOTOBA_ERR_SNIPPET_TOO_LARGE] = PE_SNIPPET_TOO_LARGE,
	[KOTOBA_ERR_BAD_CWD] = PE_BAD_CWD,
	[KOTOBA_ERR_BUSY] = PE_BUSY,
	[KOTOBA_ERR_NOT_OFFERED] = PE_NOT_OFFERED,
	[KOTOBA_ERR_REFUSED] = PE_REFUSED,
	[KOTOBA_ERR_DENIED] = PE_DENIED,
	[KOTOBA_ERR_EXPIRED] = PE_EXPIRED,
	[KOTOBA_ERR_CANCELLED] = PE_CANCELLED,
	[KOTOBA_ERR_NO_SUCH_RUN] = PE_NO_SUCH_RUN,
	[KOTOBA_ERR_NO_SUCH_CARD] = PE_NO_SUCH_CARD,
	[KOTOBA_ERR_SETUP_FAILED] = PE_SETUP_FAILED,
	[KOTOBA_ERR_WORKER_LOST] = PE_WORKER_LOST,
	[KOTOBA_ERR_AUDIT_UNAVAILABLE] = PE_AUDIT,
	[KOTOBA_ERR_AUDIT_BROKEN] = PE_AUDIT_BROKEN,
	[KOTOBA_ERR_INTERNAL] = PE_INTERNAL,
};

#define N_NAMES (sizeof(names) / sizeof(names[0]))

const char *kotoba_code_name(enum kotoba_code code)
{
	if (code >= KOTOBA_ERR_TOO_LARGE && code < KOTOBA_ERR_OTHER)
		return perr_name(wire[code]);
	return (unsigned)code < N_NAMES && names[code] ? names[code] : "other";
}

const char *kotoba_choice_name(enum kotoba_choice choice)
{
	switch (choice) {
	case KOTOBA_CARD_ONCE:
		return "once";
	case KOTOBA_CARD_ALWAYS:
		return "always";
	case KOTOBA_CARD_DENY:
		return "deny";
	case KOTOBA_CARD_DEFER:
	default:
		return "defer";
	}
}

void kc_copy(char *dst, size_t len, const char *src, size_t src_len)
{
	if (!len)
		return;
	if (src_len >= len)
		src_len = len - 1;
	if (src_len)
		memcpy(dst, src, src_len);
	dst[src_len] = '\0';
}

enum kotoba_code kc_fail(struct kotoba_error *err, enum kotoba_code code, int sys_errno,
			 const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	memset(err, 0, sizeof(*err));
	err->code = code;
	err->sys_errno = sys_errno;
	snprintf(err->name, sizeof(err->name), "%s", kotoba_code_name(code));
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return code;
}

/* A broker code this library does not know maps to KOTOBA_ERR_OTHER, with
 * the broker's own word kept in err->name. */
static enum kotoba_code code_of(struct pstr name)
{
	for (size_t i = KOTOBA_ERR_TOO_LARGE; i < KOTOBA_ERR_OTHER; i++)
		if (pstr_eq(name, perr_name(wire[i])))
			return (enum kotoba_code)i;
	return KOTOBA_ERR_OTHER;
}

enum kotoba_code kc_broker_error(struct kotoba_error *err, const struct msg_error *e)
{
	enum kotoba_code code = code_of(e->code);

	if (!err)
		return code;
	memset(err, 0, sizeof(*err));
	err->code = code;
	err->from_broker = true;
	kc_copy(err->name, sizeof(err->name), e->code.ptr, e->code.len);
	kc_copy(err->message, sizeof(err->message), e->message.ptr, e->message.len);
	if (!err->message[0])
		snprintf(err->message, sizeof(err->message), "the broker answered %s", err->name);
	kc_copy(err->step, sizeof(err->step), e->step.ptr, e->step.len);
	err->sys_errno = (int)e->err_no;
	return code;
}

enum kotoba_code kc_encoded(int rc, struct kotoba_error *err)
{
	if (rc == 0)
		return KOTOBA_OK;
	if (rc == -ENOMEM)
		return kc_fail(err, KOTOBA_ERR_NOMEM, ENOMEM, "out of memory");
	return kc_fail(err, KOTOBA_ERR_INVALID, -rc, "the request cannot be encoded: %s",
		       strerror(-rc));
}
