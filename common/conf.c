/*
 * conf.c — see conf.h.
 */
#include "common/conf.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

struct seen {
	char key[CONF_KEYS_MAX][CONF_KEY_MAX];
	int line[CONF_KEYS_MAX];
	int n;
};

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' ||
	       c == '\v';
}

static int is_key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

static char *skip_space(char *s)
{
	while (is_space(*s))
		s++;
	return s;
}

static void trim_end(char *s)
{
	char *e = s + strlen(s);
	while (e > s && is_space(e[-1]))
		*--e = '\0';
}

/* Unquotes the value at v (just past its opening quote) in place; the
 * rest of the line may hold spaces and a comment only. */
static int unquote(char *v, const char **why)
{
	char *w = v, *r = v;
	for (;; r++) {
		if (*r == '\0') {
			*why = "a quoted value ends at the end of the line "
			       "without its closing quote";
			return -1;
		}
		if (*r == '"')
			break;
		if (*r == '\\' && (r[1] == '"' || r[1] == '\\'))
			r++;
		*w++ = *r;
	}
	*w = '\0';
	r = skip_space(r + 1);
	if (*r && *r != '#') {
		*why = "text after a quoted value's closing quote";
		return -1;
	}
	return 0;
}

/* Splits line (its newline gone) into key and value; 0 with *key NULL
 * for a blank or comment line, -1 with why for a bad one. */
static int split(char *line, char **key, char **value, const char **why)
{
	char *s = skip_space(line), *k = s;
	*key = NULL;
	if (*s == '\0' || *s == '#')
		return 0;
	while (is_key_char(*s))
		s++;
	char *kend = s;
	s = skip_space(s);
	if (kend == k || *s != '=') {
		*why = "expected key = value";
		return -1;
	}
	*kend = '\0';
	s = skip_space(s + 1);
	if (*s == '"') {
		if (unquote(s + 1, why) < 0)
			return -1;
		*value = s + 1;
	} else {
		char *hash = strchr(s, '#');
		if (hash)
			*hash = '\0';
		trim_end(s);
		*value = s;
	}
	*key = k;
	return 0;
}

/* Remembers key (first seen on `line`); -1 with e when it was set before
 * or there are too many. */
static int remember(struct seen *sn, const char *key, int line,
                    const char *name, struct err *e)
{
	for (int i = 0; i < sn->n; i++)
		if (!strcmp(sn->key[i], key))
			return err_fail(e, CONF_DUPLICATE,
			                "%s:%d: %s is set twice (first on "
			                "line %d): remove one",
			                name, line, key, sn->line[i]);
	if (strlen(key) >= CONF_KEY_MAX)
		return err_fail(e, CONF_UNKNOWN,
		                "%s:%d: unknown setting \"%.*s...\" (keys are "
		                "shorter than %d bytes)",
		                name, line, 32, key, CONF_KEY_MAX);
	if (sn->n == CONF_KEYS_MAX)
		return err_fail(e, CONF_TOO_LONG,
		                "%s:%d: more than %d settings in one file",
		                name, line, CONF_KEYS_MAX);
	strcpy(sn->key[sn->n], key);
	sn->line[sn->n++] = line;
	return 0;
}

int conf_read_stream(FILE *f, const char *name, conf_set_fn set, void *ctx,
                     struct err *e)
{
	static _Thread_local struct seen sn; /* 17 KiB: off the stack */
	char line[CONF_LINE_MAX];
	int no = 0;

	assert(f && name && set);
	err_clear(e);
	sn.n = 0;
	while (fgets(line, sizeof line, f)) {
		no++;
		size_t len = strlen(line);
		if (len == sizeof line - 1 && line[len - 1] != '\n' &&
		    getc(f) != EOF) /* more of the line: too long */
			return err_fail(e, CONF_TOO_LONG,
			                "%s:%d: line longer than %d bytes",
			                name, no, CONF_LINE_MAX - 1);
		/* fgets stops at a newline, a full buffer or the end: a line
		 * that ends short of all three held a NUL, which cut the
		 * value where it stood ("spot\0x" read as "spot") */
		if (len < sizeof line - 1 && (len == 0 || line[len - 1] != '\n') &&
		    !feof(f))
			return err_fail(e, CONF_SYNTAX,
			                "%s:%d: a NUL byte: the file is not text "
			                "(UTF-16? save it as UTF-8)",
			                name, no);
		/* an editor's UTF-8 byte-order mark is no part of the key */
		char *start = line;
		if (no == 1 && !strncmp(line, "\xEF\xBB\xBF", 3))
			start += 3;
		char *key, *value;
		const char *why;
		if (split(start, &key, &value, &why) < 0)
			return err_fail(e, CONF_SYNTAX, "%s:%d: %s", name, no,
			                why);
		if (!key)
			continue;
		if (remember(&sn, key, no, name, e) < 0)
			return -1;
		struct err one;
		err_clear(&one);
		if (set(ctx, key, value, &one) < 0) {
			assert(one.code != 0);
			return err_fail(e, one.code, "%s:%d: %s", name, no,
			                one.msg);
		}
	}
	if (ferror(f))
		return err_fail(e, CONF_IO, "could not read config file %s",
		                name);
	return 0;
}

int conf_read_file(const char *path, conf_set_fn set, void *ctx, struct err *e)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return err_fail(e, CONF_IO, "could not open config file %s: %s",
		                path, strerror(errno));
	int rc = conf_read_stream(f, path, set, ctx, e);
	fclose(f);
	return rc;
}
