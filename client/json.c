/* SPDX-License-Identifier: MIT */
#include <stdint.h>

#include "client/cli.h"
#include "proto/proto.h" /* utf8_valid() */

/* Writes s as a JSON string.  Bytes that are not UTF-8 (a snippet may
 * print anything) become U+FFFD, so the output is always valid JSON. */
void json_string(FILE *out, const char *s, size_t len)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t i = 0;

	fputc('"', out);
	while (i < len) {
		uint8_t c = p[i];
		size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 :
					  (c & 0xf8) == 0xf0 ? 4 : 0;

		if (n == 1) {
			if (c == '"' || c == '\\')
				fprintf(out, "\\%c", c);
			else if (c == '\n')
				fputs("\\n", out);
			else if (c == '\t')
				fputs("\\t", out);
			else if (c < 0x20 || c == 0x7f)
				fprintf(out, "\\u%04x", c);
			else
				fputc(c, out);
			i++;
		} else if (n && i + n <= len && utf8_valid(p + i, n)) {
			fwrite(p + i, 1, n, out);
			i += n;
		} else {
			fputs("\\ufffd", out);
			i++;
		}
	}
	fputc('"', out);
}
