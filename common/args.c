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

int args_done(int parsed, const struct args_prog *p, const char *err)
{
	if (parsed == 0)
		return -1;
	if (parsed == 1) {
		args_usage(stdout, p);
		return 0;
	}
	fprintf(stderr, "%s: %s\n%s", p->name, err, p->synopsis);
	return 2;
}

int args_main(int argc, char **argv, const struct args_prog *p, char *err,
              size_t errlen)
{
	return args_done(args_parse(argc, argv, p->opts, p->nopts, err, errlen),
	                 p, err);
}

#define HELP_COL   26 /* where the options' texts start */
#define HELP_WIDTH 80

/* Writes text's words from column `col`, where the line is, wrapped at
 * HELP_WIDTH with the lines after indented to col; a word longer than a
 * line goes on one of its own. */
static void wrap(FILE *f, const char *text, int col)
{
	int at = col;
	for (const char *w = text; *w;) {
		w += strspn(w, " ");
		int n = (int)strcspn(w, " ");
		if (!n)
			break;
		if (at > col && at + 1 + n > HELP_WIDTH) {
			fprintf(f, "\n%*s", col, "");
			at = col;
		} else if (at > col) {
			fputc(' ', f);
			at++;
		}
		fwrite(w, 1, (size_t)n, f);
		at += n;
		w += n;
	}
	fputc('\n', f);
}

/* One entry of --help: "  --name ARG", then the help from HELP_COL (on a
 * line of its own when the name is longer). */
static void entry(FILE *f, const char *name, const char *arg, const char *help)
{
	int len = fprintf(f, "  %s%s%s", name, arg ? " " : "", arg ? arg : "");
	if (len + 2 > HELP_COL)
		fprintf(f, "\n%*s", HELP_COL, "");
	else
		fprintf(f, "%*s", HELP_COL - len, "");
	wrap(f, help, HELP_COL);
}

/* What --help adds to an option's text: an integer's range and its
 * default (the value now, when it lies in the range), a string's default. */
static void extra(const struct args_opt *o, char *buf, size_t len)
{
	buf[0] = '\0';
	if (o->kind == ARGS_STR && *(const char *const *)o->out)
		snprintf(buf, len, " (default %s)",
		         *(const char *const *)o->out);
	if (o->kind != ARGS_INT)
		return;
	int64_t v = *(const int64_t *)o->out;
	char range[48], dflt[32] = "";
	if (o->max == INT64_MAX)
		snprintf(range, sizeof range, "%lld or more",
		         (long long)o->min);
	else
		snprintf(range, sizeof range, "%lld..%lld", (long long)o->min,
		         (long long)o->max);
	if (v >= o->min && v <= o->max)
		snprintf(dflt, sizeof dflt, ", default %lld", (long long)v);
	snprintf(buf, len, " (%s%s)", range, dflt);
}

void args_usage(FILE *f, const struct args_prog *p)
{
	fputs(p->synopsis, f);
	fputs("options:\n", f);
	for (size_t i = 0; i < p->nopts; i++) {
		const struct args_opt *o = &p->opts[i];
		char more[128], text[1024];
		assert(o->help); /* the table is the help: an option has one */
		extra(o, more, sizeof more);
		snprintf(text, sizeof text, "%s%s", o->help, more);
		entry(f, o->name, o->kind == ARGS_FLAG ? NULL : o->arg, text);
	}
	entry(f, "-h, --help", NULL, "this text");
	if (p->notes)
		fputs(p->notes, f);
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

/* args_parse's loop; with store 0 it only checks (and finds --help), so
 * that nothing is stored from a command line that fails or asks for help. */
static int scan(int argc, char **argv, const struct args_opt *opts,
                size_t nopts, char *err, size_t errlen, int store)
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
			if (store)
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
			if (store)
				*(const char **)o->out = v;
			continue;
		}
		int64_t n;
		if (args_int(v, o->min, o->max, &n) < 0) {
			if (o->why)
				return err_set(err, errlen, "%s", o->why);
			return err_set(err, errlen,
			               "%s must be an integer in %lld..%lld, "
			               "not \"%.40s\"",
			               o->name, (long long)o->min,
			               (long long)o->max, v);
		}
		if (store)
			*(int64_t *)o->out = n;
	}
	return 0;
}

int args_parse(int argc, char **argv, const struct args_opt *opts, size_t nopts,
               char *err, size_t errlen)
{
	int r = scan(argc, argv, opts, nopts, err, errlen, 0);
	return r ? r : scan(argc, argv, opts, nopts, err, errlen, 1);
}
