/* test_static.c — the web root: path checks as text, then on a real
 * directory with symlinks in and out of it, ETags, and the replies that
 * static_serve hands to the HTTP edge (a recording double of http.h). */
#include <check.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exchange/app.h"
#include "exchange/http.h"
#include "exchange/static.h"

/* ---- a recording double of the few http.h calls static_serve makes ---- */

struct http_req {
	struct app *app;
	const char *method, *path, *inm;
	int status;
	int replies;
	char ctype[64];
	char slug[32];
	char detail[256];
	size_t len;
	char hdr[8][2][256];
	int nhdr;
};

void *http_app(struct http_req *rq)
{
	return rq->app;
}

const char *http_method(struct http_req *rq)
{
	return rq->method;
}

const char *http_path(struct http_req *rq)
{
	return rq->path;
}

const char *http_header(struct http_req *rq, const char *name)
{
	return strcmp(name, "If-None-Match") == 0 ? rq->inm : NULL;
}

void http_add_header(struct http_req *rq, const char *name, const char *value)
{
	ck_assert_int_lt(rq->nhdr, 8);
	snprintf(rq->hdr[rq->nhdr][0], sizeof rq->hdr[0][0], "%s", name);
	snprintf(rq->hdr[rq->nhdr][1], sizeof rq->hdr[0][1], "%s", value);
	rq->nhdr++;
}

void http_reply_raw(struct http_req *rq, int status, const char *ctype,
                    const char *body, size_t len)
{
	(void)body;
	rq->replies++;
	rq->status = status;
	rq->len = len;
	snprintf(rq->ctype, sizeof rq->ctype, "%s", ctype);
}

void http_problem(struct http_req *rq, int status, const char *slug,
                  const char *title, const char *detail_fmt, ...)
{
	va_list ap;
	(void)title;
	rq->replies++;
	rq->status = status;
	snprintf(rq->slug, sizeof rq->slug, "%s", slug);
	va_start(ap, detail_fmt);
	vsnprintf(rq->detail, sizeof rq->detail, detail_fmt, ap);
	va_end(ap);
}

static const char *hdr(const struct http_req *rq, const char *name)
{
	for (int i = 0; i < rq->nhdr; i++)
		if (strcmp(rq->hdr[i][0], name) == 0)
			return rq->hdr[i][1];
	return NULL;
}

/* ---- a web root on disk, with a secret just outside it ---- */

static char base[PATH_MAX], root[PATH_MAX + 8];
static struct static_root sr;

static void put(const char *rel, const char *text)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/%s", base, rel);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void link_to(const char *target, const char *rel)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/%s", base, rel);
	ck_assert_int_eq(symlink(target, p), 0);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	char p[PATH_MAX + 64], err[256];
	snprintf(base, sizeof base, "%s/ramex-static-XXXXXX",
	         tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(base));
	snprintf(root, sizeof root, "%s/web", base);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	snprintf(p, sizeof p, "%s/js", root);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	put("secret.txt", "outside the root");
	put("web/index.html", "<!doctype html><title>start</title>");
	put("web/js/fmt.js", "export const x = 1;\n");
	put("web/js/index.html", "<p>js index</p>");
	put("web/.stamp", "");
	put("web/LICENSE", "MIT");
	link_to("js/fmt.js", "web/alias.js");     /* inside: fine */
	link_to("../secret.txt", "web/leak.txt"); /* out: refused */
	link_to(base, "web/up");                  /* a dir out */
	link_to("/etc/passwd", "web/passwd");     /* absolute out */
	ck_assert_int_eq(static_root_init(&sr, root, "/web", err, sizeof err),
	                 0);
}

static void teardown(void)
{
	const char *files[] = {"web/js/fmt.js",  "web/js/index.html",
	                       "web/index.html", "web/.stamp",
	                       "web/LICENSE",    "web/alias.js",
	                       "web/leak.txt",   "web/up",
	                       "web/passwd",     "secret.txt"};
	char p[PATH_MAX + 64];
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", base, files[i]);
		unlink(p);
	}
	snprintf(p, sizeof p, "%s/web/js", base);
	rmdir(p);
	rmdir(root);
	rmdir(base);
}

/* ---- path checks as text ---- */

static enum static_path_rc clean(const char *path, char *rel)
{
	char why[STATIC_MSG_MAX];
	return static_clean_path("/web", path, strlen(path), rel,
	                         STATIC_URL_MAX + 16, why, sizeof why);
}

START_TEST(start_page_and_files_map_to_relative_paths)
{
	char rel[STATIC_URL_MAX + 16];
	ck_assert_int_eq(clean("/", rel), STATIC_PATH_OK);
	ck_assert_str_eq(rel, "index.html");
	ck_assert_int_eq(clean("/web", rel), STATIC_PATH_OK);
	ck_assert_str_eq(rel, "index.html");
	ck_assert_int_eq(clean("/web/", rel), STATIC_PATH_OK);
	ck_assert_str_eq(rel, "index.html");
	ck_assert_int_eq(clean("/web/js/fmt.js", rel), STATIC_PATH_OK);
	ck_assert_str_eq(rel, "js/fmt.js");
	ck_assert_int_eq(clean("/web/js/", rel), STATIC_PATH_OK);
	ck_assert_str_eq(rel, "js/index.html");
	ck_assert_int_eq(clean("/web/vendor/uplot/uPlot.esm.js", rel),
	                 STATIC_PATH_OK);
	ck_assert_str_eq(rel, "vendor/uplot/uPlot.esm.js");
}
END_TEST

START_TEST(paths_outside_the_mount_are_not_ours)
{
	char rel[STATIC_URL_MAX + 16];
	ck_assert_int_eq(clean("/webx/a.js", rel), STATIC_PATH_OUTSIDE);
	ck_assert_int_eq(clean("/v1/markets", rel), STATIC_PATH_OUTSIDE);
	ck_assert_int_eq(clean("/we", rel), STATIC_PATH_OUTSIDE);
	ck_assert_int_eq(clean("", rel), STATIC_PATH_OUTSIDE);
}
END_TEST

START_TEST(dot_segments_and_hidden_files_are_refused)
{
	char rel[STATIC_URL_MAX + 16];
	const char *bad[] = {
	    "/web/..",           "/web/../secret.txt", "/web/js/../../x",
	    "/web/./index.html", "/web/.stamp",        "/web/js/..",
	    "/web//index.html",  "/web/js//fmt.js",    "/web/a\\..\\b",
	    "/web/a\x01.js",     "/web/a\x7f.js"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(clean(bad[i], rel) == STATIC_PATH_BAD,
		              "%s was not refused", bad[i]);
}
END_TEST

START_TEST(nul_inside_the_path_is_refused)
{
	/* what "/web/index.html%00.png" decodes to: the length is the truth */
	const char p[] = "/web/index.html\0.png";
	char rel[STATIC_URL_MAX + 16], why[STATIC_MSG_MAX];
	ck_assert_int_eq(static_clean_path("/web", p, sizeof p - 1, rel,
	                                   sizeof rel, why, sizeof why),
	                 STATIC_PATH_BAD);
	ck_assert_str_eq(why, "the path holds a NUL byte");
}
END_TEST

START_TEST(overlong_paths_are_refused_before_disk)
{
	char p[STATIC_URL_MAX + 64], rel[STATIC_URL_MAX + 16];
	char why[STATIC_MSG_MAX];
	memset(p, 'a', sizeof p);
	memcpy(p, "/web/", 5);
	p[sizeof p - 1] = 0;
	ck_assert_int_eq(static_clean_path("/web", p, strlen(p), rel,
	                                   sizeof rel, why, sizeof why),
	                 STATIC_PATH_BAD);
	/* and a small output buffer is never overrun */
	char small[16];
	ck_assert_int_eq(static_clean_path("/web", "/web/js/longer-name.js", 22,
	                                   small, sizeof small, why,
	                                   sizeof why),
	                 STATIC_PATH_BAD);
}
END_TEST

START_TEST(content_types_by_extension)
{
	ck_assert_str_eq(static_content_type("a/b.html"),
	                 "text/html; charset=utf-8");
	ck_assert_str_eq(static_content_type("x.mjs"),
	                 "text/javascript; charset=utf-8");
	ck_assert_str_eq(static_content_type("vendor/uplot/uPlot.min.css"),
	                 "text/css; charset=utf-8");
	ck_assert_str_eq(static_content_type("vendor/uplot/LICENSE"),
	                 "text/plain; charset=utf-8");
	ck_assert_str_eq(static_content_type("a.bin"),
	                 "application/octet-stream");
	/* a dot in a folder name is not an extension */
	ck_assert_str_eq(static_content_type("v1.2/LICENSE"),
	                 "text/plain; charset=utf-8");
}
END_TEST

/* ---- on disk ---- */

static int get(const char *method, const char *path, const char *inm,
               struct static_reply *rep)
{
	return static_get(&sr, method, path, strlen(path), inm, rep);
}

START_TEST(serves_files_with_type_and_etag)
{
	struct static_reply rep;
	ck_assert_int_eq(get("GET", "/web/js/fmt.js", NULL, &rep), 200);
	ck_assert_uint_eq(rep.len, strlen("export const x = 1;\n"));
	ck_assert_int_eq(memcmp(rep.body, "export const x = 1;\n", rep.len), 0);
	ck_assert_str_eq(rep.ctype, "text/javascript; charset=utf-8");
	ck_assert_int_eq(rep.is_page, 0);
	ck_assert_int_eq(rep.etag[0], '"');
	static_reply_clear(&rep);

	ck_assert_int_eq(get("HEAD", "/", NULL, &rep), 200);
	ck_assert_int_eq(rep.is_page, 1);
	static_reply_clear(&rep);
	ck_assert_int_eq(get("GET", "/web/js/", NULL, &rep), 200);
	ck_assert_int_eq(memcmp(rep.body, "<p>js index</p>", rep.len), 0);
	static_reply_clear(&rep);
}
END_TEST

START_TEST(if_none_match_gives_304)
{
	struct static_reply rep;
	char tag[64], weak[80], list[160];
	ck_assert_int_eq(get("GET", "/web/index.html", NULL, &rep), 200);
	snprintf(tag, sizeof tag, "%s", rep.etag);
	static_reply_clear(&rep);
	snprintf(weak, sizeof weak, "W/%s", tag);
	snprintf(list, sizeof list, "\"other\", %s", tag);

	ck_assert_int_eq(get("GET", "/web/index.html", tag, &rep), 304);
	ck_assert_ptr_null(rep.body);
	static_reply_clear(&rep);
	ck_assert_int_eq(get("GET", "/web/index.html", weak, &rep), 304);
	static_reply_clear(&rep);
	ck_assert_int_eq(get("GET", "/web/index.html", list, &rep), 304);
	static_reply_clear(&rep);
	ck_assert_int_eq(get("GET", "/web/index.html", "*", &rep), 304);
	static_reply_clear(&rep);
	ck_assert_int_eq(get("GET", "/web/index.html", "\"other\"", &rep), 200);
	static_reply_clear(&rep);
	/* a tag that our tag merely starts with does not match */
	char prefix[64];
	snprintf(prefix, sizeof prefix, "%.*s", (int)strlen(tag) - 2, tag);
	ck_assert_int_eq(get("GET", "/web/index.html", prefix, &rep), 200);
	static_reply_clear(&rep);
}
END_TEST

START_TEST(symlinks_inside_are_served_out_are_not)
{
	struct static_reply rep;
	ck_assert_int_eq(get("GET", "/web/alias.js", NULL, &rep), 200);
	static_reply_clear(&rep);
	ck_assert_int_eq(get("GET", "/web/leak.txt", NULL, &rep), 404);
	ck_assert_ptr_null(rep.body);
	static_reply_clear(&rep);
	ck_assert_int_eq(get("GET", "/web/up/secret.txt", NULL, &rep), 404);
	static_reply_clear(&rep);
	ck_assert_int_eq(get("GET", "/web/passwd", NULL, &rep), 404);
	static_reply_clear(&rep);
}
END_TEST

START_TEST(missing_dirs_and_wrong_methods)
{
	struct static_reply rep;
	ck_assert_int_eq(get("GET", "/web/nope.html", NULL, &rep), 404);
	static_reply_clear(&rep);
	ck_assert_int_eq(get("GET", "/web/js", NULL, &rep), 404); /* a dir */
	static_reply_clear(&rep);
	ck_assert_int_eq(get("GET", "/web/../secret.txt", NULL, &rep), 400);
	static_reply_clear(&rep);
	ck_assert_int_eq(get("POST", "/web/index.html", NULL, &rep), 405);
	static_reply_clear(&rep);
	ck_assert_int_eq(get("GET", "/web/LICENSE", NULL, &rep), 200);
	ck_assert_str_eq(rep.ctype, "text/plain; charset=utf-8");
	static_reply_clear(&rep);
}
END_TEST

START_TEST(root_init_refuses_what_cannot_be_a_root)
{
	struct static_root r;
	char err[256], p[PATH_MAX + 64];
	ck_assert_int_eq(static_root_init(&r, "/nonexistent/ramex-web", "/web",
	                                  err, sizeof err),
	                 -1);
	ck_assert_ptr_nonnull(strstr(err, "could not open web root"));
	snprintf(p, sizeof p, "%s/index.html", root);
	ck_assert_int_eq(static_root_init(&r, p, "/web", err, sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "not a directory"));
	ck_assert_int_eq(static_root_init(&r, "/", "/web", err, sizeof err),
	                 -1);
	ck_assert_int_eq(static_root_init(&r, root, "web", err, sizeof err),
	                 -1);
	ck_assert_int_eq(static_root_init(&r, root, "/web/", err, sizeof err),
	                 -1);
	/* "/" as mount: every path is a file under the root */
	ck_assert_int_eq(static_root_init(&r, root, "/", err, sizeof err), 0);
	struct static_reply rep;
	ck_assert_int_eq(static_get(&r, "GET", "/js/fmt.js", 10, NULL, &rep),
	                 200);
	static_reply_clear(&rep);
}
END_TEST

/* ---- what reaches the HTTP edge ---- */

START_TEST(serve_adds_headers_and_problem_replies)
{
	struct http_req rq = {.method = "GET", .path = "/web/index.html"};
	static_serve(&rq, &sr);
	ck_assert_int_eq(rq.replies, 1);
	ck_assert_int_eq(rq.status, 200);
	ck_assert_str_eq(rq.ctype, "text/html; charset=utf-8");
	ck_assert_ptr_nonnull(hdr(&rq, "ETag"));
	ck_assert_str_eq(hdr(&rq, "X-Content-Type-Options"), "nosniff");
	ck_assert_ptr_nonnull(
	    strstr(hdr(&rq, "Content-Security-Policy"), "default-src 'self'"));

	struct http_req js = {.method = "GET", .path = "/web/js/fmt.js"};
	static_serve(&js, &sr);
	ck_assert_int_eq(js.status, 200);
	ck_assert_ptr_null(hdr(&js, "Content-Security-Policy"));
	/* revalidated, not refused to the cache: no-store would make the
	 * ETag useless, and no name is content-hashed for a long max-age */
	ck_assert_str_eq(hdr(&rq, "Cache-Control"), "no-cache");
	ck_assert_str_eq(hdr(&js, "Cache-Control"), "no-cache");

	struct http_req again = {.method = "GET",
	                         .path = "/web/index.html",
	                         .inm = hdr(&rq, "ETag")};
	static_serve(&again, &sr);
	ck_assert_int_eq(again.status, 304);
	ck_assert_uint_eq(again.len, 0);
	/* the 304 carries the tag and the caching rule again (RFC 9111) */
	ck_assert_str_eq(hdr(&again, "ETag"), hdr(&rq, "ETag"));
	ck_assert_str_eq(hdr(&again, "Cache-Control"), "no-cache");

	struct http_req missing = {.method = "GET", .path = "/web/leak.txt"};
	static_serve(&missing, &sr);
	ck_assert_int_eq(missing.replies, 1);
	ck_assert_int_eq(missing.status, 404);
	ck_assert_str_eq(missing.slug, "not-found");
	ck_assert_str_eq(missing.detail, "no page leak.txt");
	/* errors keep the API's default (no-store): nothing to revalidate */
	ck_assert_ptr_null(hdr(&missing, "Cache-Control"));

	struct http_req bad = {.method = "GET", .path = "/web/../x"};
	static_serve(&bad, &sr);
	ck_assert_int_eq(bad.status, 400);
	ck_assert_str_eq(bad.slug, "bad-path");

	struct http_req post = {.method = "POST", .path = "/web/"};
	static_serve(&post, &sr);
	ck_assert_int_eq(post.status, 405);
	ck_assert_str_eq(hdr(&post, "Allow"), "GET, HEAD");
}
END_TEST

START_TEST(handler_serves_the_apps_root_or_says_how_to_set_one)
{
	static struct app a; /* large (paths), and zero: no root */
	struct http_req rq = {.app = &a, .method = "GET", .path = "/"};
	h_web(&rq);
	ck_assert_int_eq(rq.status, 404);
	ck_assert_ptr_nonnull(strstr(rq.detail, "--web_root"));

	a.web = sr;
	struct http_req ok = {.app = &a, .method = "GET", .path = "/"};
	h_web(&ok);
	ck_assert_int_eq(ok.replies, 1);
	ck_assert_int_eq(ok.status, 200);
	ck_assert_str_eq(ok.ctype, "text/html; charset=utf-8");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("static");
	TCase *text = tcase_create("path-text");
	tcase_add_test(text, start_page_and_files_map_to_relative_paths);
	tcase_add_test(text, paths_outside_the_mount_are_not_ours);
	tcase_add_test(text, dot_segments_and_hidden_files_are_refused);
	tcase_add_test(text, nul_inside_the_path_is_refused);
	tcase_add_test(text, overlong_paths_are_refused_before_disk);
	tcase_add_test(text, content_types_by_extension);
	suite_add_tcase(s, text);

	TCase *disk = tcase_create("disk");
	tcase_add_checked_fixture(disk, setup, teardown);
	tcase_add_test(disk, serves_files_with_type_and_etag);
	tcase_add_test(disk, if_none_match_gives_304);
	tcase_add_test(disk, symlinks_inside_are_served_out_are_not);
	tcase_add_test(disk, missing_dirs_and_wrong_methods);
	tcase_add_test(disk, root_init_refuses_what_cannot_be_a_root);
	tcase_add_test(disk, serve_adds_headers_and_problem_replies);
	tcase_add_test(disk,
	               handler_serves_the_apps_root_or_says_how_to_set_one);
	suite_add_tcase(s, disk);

	SRunner *sr_ = srunner_create(s);
	srunner_run_all(sr_, CK_NORMAL);
	int failed = srunner_ntests_failed(sr_);
	srunner_free(sr_);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
