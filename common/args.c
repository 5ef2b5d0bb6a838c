/*
 * args.c — see args.h.
 */
#include "common/args.h"

#include "common/err.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int args_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	/* strtoll would take leading spaces and a '+' too */
	if (!((*s >= '0' && *s <= '9') ||
	      (*s == '-' && s[1] >= '0' && s[1] <= '9')))
		return -1;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int args_done(int parsed, const char *prog, const char *err,
              void (*usage)(FILE *f))
{
	if (parsed == 0)
		return -1;
	if (parsed == 1) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "%s: %s\n", prog, err);
	usage(stderr);
	return 2;
}

/* The option `arg` names (up to '=' when it has one), or NULL. */
static const struct args_opt *find(const struct args_opt *opts, size_t n,
                                   const char *arg, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(opts[i].name) == len &&
		    memcmp(opts[i].name, arg, len) == 0)
			return &opts[i];
	return NULL;
}

int args_parse(int argc, char **argv, const struct args_opt *opts, size_t nopts,
               char *err, size_t errlen)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq = strchr(a, '=');
		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			return 1;
		size_t len =
		    eq && !strncmp(a, "--", 2) ? (size_t)(eq - a) : strlen(a);
		const struct args_opt *o = find(opts, nopts, a, len);
		if (!o)
			return err_set(err, errlen,
			               "unknown option \"%.*s\" (see --help)",
			               (int)(len > 64 ? 64 : len), a);
		assert(o->out);
		if (o->kind == ARGS_FLAG) {
			if (len != strlen(a))
				return err_set(err, errlen, "%s takes no value",
				               o->name);
			*(int *)o->out = 1;
			continue;
		}
		const char *v = len != strlen(a) ? a + len + 1 : NULL;
		if (!v) {
			if (i + 1 >= argc)
				return err_set(err, errlen, "%s needs a value",
				               o->name);
			v = argv[++i];
		}
		if (o->kind == ARGS_STR) {
			*(const char **)o->out = v;
			continue;
		}
		if (args_int(v, o->min, o->max, (int64_t *)o->out) < 0) {
			if (o->why)
				return err_set(err, errlen, "%s", o->why);
			return err_set(err, errlen,
			               "%s must be an integer in %lld..%lld, "
			               "not \"%.40s\"",
			               o->name, (long long)o->min,
			               (long long)o->max, v);
		}
	}
	return 0;
}
