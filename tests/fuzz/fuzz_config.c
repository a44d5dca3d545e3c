/* SPDX-License-Identifier: MIT
 * Fuzz target: the configuration parser (broker/config.c).
 *
 * Even first byte: the rest is a config file, loaded with config_load()
 * from a real file.  Odd: the rest is up to eight "section\nkey\nvalue\n"
 * triples given to config_set(), as the command line does.  Checked:
 * a failed load or set leaves the struct as it was and says why; an
 * accepted configuration printed by config_print() loads back to the very
 * same struct (config.h: "config_load reads it back unchanged").
 */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/config.h"
#include "tests/fuzz/fuzz.h"

static char path[64];
static int fd = -1;

static void cleanup(void)
{
	if (path[0])
		unlink(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	snprintf(path, sizeof(path), "/dev/shm/kotoba-fuzz-config-%d.conf", (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror(path);
		abort();
	}
	atexit(cleanup);
	return 0;
}

static void put_file(const void *p, size_t n)
{
	FUZZ_ASSERT(ftruncate(fd, 0) == 0);
	FUZZ_ASSERT(pwrite(fd, p, n, 0) == (ssize_t)n);
}

static void round_trip(const struct config *c)
{
	static struct config back;
	struct config_error err = { 0 };
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	FUZZ_ASSERT(out);
	config_validate(c, &err);
	config_print(out, c);
	fclose(out);
	put_file(text, len);
	config_defaults(&back);
	if (config_load(&back, path, &err) < 0) {
		fprintf(stderr, "printed config does not load: line %u: %s\n%s\n", err.line,
			err.message, text);
		FUZZ_ASSERT(!"config_print output loads");
	}
	FUZZ_ASSERT(!memcmp(&back, c, sizeof(back)));
	free(text);
}

static void from_file(const uint8_t *data, size_t size)
{
	static struct config c, before;
	struct config_error err = { 0 };

	config_defaults(&c);
	before = c;
	put_file(data, size);
	if (config_load(&c, path, &err) < 0) {
		FUZZ_ASSERT(!memcmp(&c, &before, sizeof(c)));
		FUZZ_ASSERT(err.message[0] && !strcmp(err.file, path));
		return;
	}
	round_trip(&c);
}

/* Takes the next '\n'-terminated field, NUL-terminating it in place. */
static char *field(char **p, char *end)
{
	char *s = *p, *nl;

	if (s >= end)
		return NULL;
	nl = memchr(s, '\n', (size_t)(end - s));
	if (!nl)
		return NULL;
	*nl = '\0';
	*p = nl + 1;
	return s;
}

static void from_sets(const uint8_t *data, size_t size)
{
	static struct config c, before;
	char *buf = malloc(size + 1), *p = buf, *end = buf + size;

	FUZZ_ASSERT(buf);
	memcpy(buf, data, size);
	config_defaults(&c);
	for (int i = 0; i < 8; i++) {
		struct config_error err = { 0 };
		char *sec = field(&p, end), *key = field(&p, end), *val = field(&p, end);

		if (!val)
			break;
		before = c;
		if (config_set(&c, sec, key, val, &err) < 0) {
			FUZZ_ASSERT(!memcmp(&c, &before, sizeof(c)));
			FUZZ_ASSERT(err.message[0]);
		}
	}
	free(buf);
	round_trip(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		from_sets(data + 1, size - 1);
	else
		from_file(data + 1, size - 1);
	return 0;
}
