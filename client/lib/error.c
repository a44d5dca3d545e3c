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
	case KOTOBA_CARD_RERUN:
		return "rerun";
	case KOTOBA_CARD_LEAVE:
		return "leave";
	case KOTOBA_CARD_DEFER:
	default:
		return "defer";
	}
}

const char *kotoba_version(void)
{
	return KOTOBA_CLIENT_VERSION;
}

size_t kc_size_of(const void *s)
{
	size_t size;

	memcpy(&size, s, sizeof(size));
	return size;
}

void kc_put_sized(void *dst, const void *src, size_t src_size)
{
	size_t size = kc_size_of(dst);

	memcpy(dst, src, size < src_size ? size : src_size);
	memcpy(dst, &size, sizeof(size));
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
	struct kotoba_error e = { .size = sizeof(e), .code = code, .sys_errno = sys_errno };
	va_list ap;

	if (!err || kc_size_of(err) < KC_ERROR_SIZE)
		return code;
	snprintf(e.name, sizeof(e.name), "%s", kotoba_code_name(code));
	va_start(ap, fmt);
	vsnprintf(e.message, sizeof(e.message), fmt, ap);
	va_end(ap);
	kc_put_sized(err, &e, sizeof(e));
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
	struct kotoba_error k = { .size = sizeof(k), .code = code_of(e->code),
				  .from_broker = true, .sys_errno = (int)e->err_no };

	if (!err || kc_size_of(err) < KC_ERROR_SIZE)
		return k.code;
	kc_copy(k.name, sizeof(k.name), e->code.ptr, e->code.len);
	kc_copy(k.message, sizeof(k.message), e->message.ptr, e->message.len);
	if (!k.message[0])
		snprintf(k.message, sizeof(k.message), "the broker answered %s", k.name);
	kc_copy(k.step, sizeof(k.step), e->step.ptr, e->step.len);
	kc_put_sized(err, &k, sizeof(k));
	return k.code;
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
