/*
 * static.c — see static.h.
 *
 * The path is judged twice, on purpose: once as text (static_clean_path),
 * so that "..", NUL and friends are refused without a file system call, and
 * once after realpath(3), so that a symlink inside the root cannot lead out
 * of it. The file is then opened with O_NOFOLLOW and checked with fstat on
 * the descriptor we read from, so what we send is what we checked.
 */
#include "exchange/static.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exchange/app.h"
#include "exchange/http.h"

/* Only ramexd itself: the pages load nothing from elsewhere, and a script
 * injected through data shown on a page cannot run (no inline script). The
 * chart libraries set element styles, hence style-src 'unsafe-inline'. */
#define STATIC_CSP                                                             \
	"default-src 'self'; script-src 'self'; style-src 'self' "             \
	"'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "          \
	"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

int static_root_init(struct static_root *r, const char *dir, const char *mount,
                     char *err, size_t errlen)
{
	struct stat st;
	char real[PATH_MAX];

	memset(r, 0, sizeof *r);
	if (!mount || mount[0] != '/' || strlen(mount) >= sizeof r->mount ||
	    (strlen(mount) > 1 && mount[strlen(mount) - 1] == '/')) {
		err_set(
		    err, errlen,
		    "web mount \"%s\" must start with '/' and not end with one",
		    mount ? mount : "");
		return -1;
	}
	if (!realpath(dir, real) || stat(real, &st) < 0) {
		err_set(err, errlen, "could not open web root %s: %s", dir,
		        strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		err_set(err, errlen, "web root %s is not a directory", dir);
		return -1;
	}
	/* "/" as root would make the inside check "starts with //". */
	if (strcmp(real, "/") == 0) {
		err_set(err, errlen, "web root %s is the whole file system",
		        dir);
		return -1;
	}
	snprintf(r->dir, sizeof r->dir, "%s", real);
	r->dirlen = strlen(r->dir);
	snprintf(r->mount, sizeof r->mount, "%s",
	         strcmp(mount, "/") ? mount : "");
	return 0;
}

enum static_path_rc static_clean_path(const char *mount, const char *path,
                                      size_t len, char *rel, size_t relcap,
                                      char *why, size_t whylen)
{
	size_t ml = strlen(mount);
	const char *p, *end = path + len;

	if (relcap < sizeof "index.html")
		return STATIC_PATH_BAD;
	rel[0] = 0;
	if (len > STATIC_URL_MAX) {
		err_set(why, whylen, "the path is longer than %d bytes",
		        STATIC_URL_MAX);
		return STATIC_PATH_BAD;
	}
	for (p = path; p < end; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == 0) {
			err_set(why, whylen, "the path holds a NUL byte");
			return STATIC_PATH_BAD;
		}
		if (c < 0x20 || c == 0x7f || c == '\\') {
			err_set(why, whylen,
			        "the path holds a control character or "
			        "backslash");
			return STATIC_PATH_BAD;
		}
	}
	/* "/" is the start page; so are "/web" and "/web/". */
	if (len == 1 && path[0] == '/') {
		strcpy(rel, "index.html");
		return STATIC_PATH_OK;
	}
	if (len < ml || memcmp(path, mount, ml) != 0 ||
	    (len > ml && path[ml] != '/'))
		return STATIC_PATH_OUTSIDE;
	p = path + ml;
	if (p == end || (p + 1 == end && *p == '/')) {
		strcpy(rel, "index.html");
		return STATIC_PATH_OK;
	}
	p++; /* past the '/' after the mount */

	size_t out = 0;
	while (p < end) {
		const char *se = memchr(p, '/', (size_t)(end - p));
		size_t sl = se ? (size_t)(se - p) : (size_t)(end - p);
		if (sl == 0) {
			err_set(why, whylen, "the path has an empty segment");
			return STATIC_PATH_BAD;
		}
		if (p[0] == '.') {
			/* ".", ".." and hidden files alike: none is a page */
			err_set(why, whylen,
			        "path segments may not start with '.'");
			return STATIC_PATH_BAD;
		}
		if (out + sl + 2 > relcap) {
			err_set(why, whylen, "the path is too long");
			return STATIC_PATH_BAD;
		}
		memcpy(rel + out, p, sl);
		out += sl;
		p += sl;
		if (p < end) { /* at a '/' */
			rel[out++] = '/';
			p++;
			if (p == end) { /* "dir/": its index page */
				if (out + sizeof "index.html" > relcap) {
					err_set(why, whylen,
					        "the path is too long");
					return STATIC_PATH_BAD;
				}
				strcpy(rel + out, "index.html");
				return STATIC_PATH_OK;
			}
		}
	}
	rel[out] = 0;
	return STATIC_PATH_OK;
}

static const struct {
	const char *ext;
	const char *type;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".json", "application/json"},
    {".map", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".woff2", "font/woff2"},
    {".txt", "text/plain; charset=utf-8"},
    {".csv", "text/csv; charset=utf-8"},
};

const char *static_content_type(const char *name)
{
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	const char *dot = strrchr(base, '.');
	if (!dot)
		/* LICENSE, NOTICE, README: the licences we ship are text */
		return "text/plain; charset=utf-8";
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (strcmp(dot, types[i].ext) == 0)
			return types[i].type;
	return "application/octet-stream";
}

/* Whether If-None-Match (a list of tags, or "*") holds our tag. */
static int etag_matches(const char *inm, const char *etag)
{
	size_t el = strlen(etag);
	const char *p = inm;

	while (*p) {
		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		if (*p == '*')
			return 1;
		if (p[0] == 'W' && p[1] == '/')
			p += 2; /* weak comparison, as RFC 9110 says for GET */
		if (strncmp(p, etag, el) == 0 &&
		    (p[el] == 0 || p[el] == ',' || p[el] == ' '))
			return 1;
		while (*p && *p != ',')
			p++;
	}
	return 0;
}

__attribute__((format(printf, 3, 4))) static int
fail(struct static_reply *rep, int status, const char *fmt, ...)
{
	va_list ap;
	rep->status = status;
	va_start(ap, fmt);
	vsnprintf(rep->why, sizeof rep->why, fmt, ap);
	va_end(ap);
	return status;
}

int static_get(const struct static_root *root, const char *method,
               const char *path, size_t len, const char *if_none_match,
               struct static_reply *rep)
{
	char rel[STATIC_URL_MAX + 16], joined[PATH_MAX], real[PATH_MAX];
	char why[STATIC_MSG_MAX];
	struct stat st;
	int fd = -1;

	memset(rep, 0, sizeof *rep);
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return fail(rep, 405, "%s is not served here; use GET or HEAD",
		            method);
	switch (static_clean_path(root->mount, path, len, rel, sizeof rel, why,
	                          sizeof why)) {
	case STATIC_PATH_OK:
		break;
	case STATIC_PATH_BAD:
		return fail(rep, 400, "%s", why);
	case STATIC_PATH_OUTSIDE:
		return fail(rep, 404, "no page is served at this path");
	}
	if (snprintf(joined, sizeof joined, "%s/%s", root->dir, rel) >=
	    (int)sizeof joined)
		return fail(rep, 400, "the path is too long");
	if (!realpath(joined, real))
		return fail(rep, 404, "no page %s", rel);
	if (strncmp(real, root->dir, root->dirlen) != 0 ||
	    real[root->dirlen] != '/')
		/* a symlink out of the root: as if it were not there */
		return fail(rep, 404, "no page %s", rel);

	fd = open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail(rep, 404, "no page %s", rel);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(rep, 404, "no page %s", rel);
	}
	if (st.st_size > STATIC_FILE_MAX) {
		close(fd);
		return fail(rep, 500, "%s is larger than the 8 MiB served",
		            rel);
	}
	snprintf(rep->etag, sizeof rep->etag, "\"%" PRIx64 "-%" PRIx64 "\"",
	         (uint64_t)st.st_size,
	         (uint64_t)st.st_mtim.tv_sec * 1000000000u +
	             (uint64_t)st.st_mtim.tv_nsec);
	rep->ctype = static_content_type(rel);
	rep->is_page = strncmp(rep->ctype, "text/html", 9) == 0;
	if (if_none_match && etag_matches(if_none_match, rep->etag)) {
		close(fd);
		rep->status = 304;
		return 304;
	}

	rep->len = (size_t)st.st_size;
	rep->body = malloc(rep->len ? rep->len : 1);
	if (!rep->body) {
		close(fd);
		rep->len = 0;
		return fail(rep, 500, "out of memory reading a page");
	}
	size_t got = 0;
	while (got < rep->len) {
		ssize_t n = read(fd, rep->body + got, rep->len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			close(fd);
			static_reply_clear(rep);
			return fail(rep, 500, "could not read a page: %s",
			            strerror(e));
		}
		got += (size_t)n;
	}
	close(fd);
	rep->status = 200;
	return 200;
}

void static_reply_clear(struct static_reply *rep)
{
	free(rep->body);
	rep->body = NULL;
	rep->len = 0;
}

void static_serve(struct http_req *rq, const struct static_root *root)
{
	struct static_reply rep;
	const char *path = http_path(rq);

	static_get(root, http_method(rq), path, strlen(path),
	           http_header(rq, "If-None-Match"), &rep);
	switch (rep.status) {
	case 200:
	case 304:
		http_add_header(rq, "ETag", rep.etag);
		http_add_header(rq, "Cache-Control", STATIC_CACHE_CONTROL);
		http_add_header(rq, "X-Content-Type-Options", "nosniff");
		if (rep.is_page)
			http_add_header(rq, "Content-Security-Policy",
			                STATIC_CSP);
		http_reply_raw(rq, rep.status, rep.ctype,
		               rep.body ? rep.body : "", rep.len);
		break;
	case 400:
		http_problem(rq, 400, "bad-path", "bad path", "%s", rep.why);
		break;
	case 405:
		http_add_header(rq, "Allow", "GET, HEAD");
		http_problem(rq, 405, "method-not-allowed",
		             "method not allowed", "%s", rep.why);
		break;
	case 404:
		http_problem(rq, 404, "not-found", "no such page", "%s",
		             rep.why);
		break;
	default:
		http_problem(rq, 500, "internal", "could not serve a page",
		             "%s", rep.why);
		break;
	}
	static_reply_clear(&rep);
}

void h_web(struct http_req *rq)
{
	const struct app *a = http_app(rq);
	if (!a->web.dir[0]) {
		http_problem(rq, 404, "not-found", "no web pages",
		             "this ramexd serves no web pages; start it with "
		             "--web_root=DIR (make builds build/web)");
		return;
	}
	static_serve(rq, &a->web);
}
