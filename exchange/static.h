/*
 * static.h — serves the web pages (web/, assembled into build/web) from one
 * directory, the web root, read-only.
 *
 * A URL path under the mount ("/web/js/fmt.js", or "/" for the start page)
 * is first checked as text, with no file system access: it must be short,
 * hold no NUL, backslash or control character, no empty, "." or ".."
 * segment and no segment that starts with a dot (build stamps, editor
 * files). Only then is it joined to the root and resolved with realpath(3);
 * the result must still lie inside the root, so a symlink that leads out of
 * it is refused like "..", and the file must be a regular file. A directory
 * path ending in "/" serves its index.html.
 *
 * Replies carry a content type by extension, a strong ETag built from size
 * and modification time (If-None-Match gives 304), nosniff, and for pages a
 * Content-Security-Policy that allows only ramexd itself. Every file is
 * served with Cache-Control: no-cache (STATIC_CACHE_CONTROL): the browser
 * keeps it but asks again each time, and the ETag turns that into a 304.
 * No file name carries a content hash, so a long max-age would keep an old
 * script after an upgrade; no-store (the API's default) would defeat the
 * ETag altogether. Errors are 404 (or
 * 400 for a path no file can have), as RFC 9457 problem+json through
 * http_problem.
 *
 * The module owns no global state: the caller keeps one struct static_root
 * (set up once at start) and hands it to static_serve from its handler.
 */
#ifndef RAMEX_STATIC_H
#define RAMEX_STATIC_H

#include <limits.h>
#include <stddef.h>

/* Longest URL path we look at; longer is refused before touching disk. */
#define STATIC_URL_MAX 512
/* Largest file served: ours are under 1 MiB; a file read whole per request
 * must not be able to exhaust memory if someone drops a big one in. */
#define STATIC_FILE_MAX (8 * 1024 * 1024)
#define STATIC_MSG_MAX  256
/* Keep, but revalidate every time (see above). */
#define STATIC_CACHE_CONTROL "no-cache"

struct static_root {
	char dir[PATH_MAX]; /* realpath of the root, no trailing '/' */
	size_t dirlen;
	char mount[64]; /* URL prefix, e.g. "/web"; "/" serves index.html */
};

/*
 * Sets up a root on `dir`, which must be an existing directory, served under
 * `mount` ("/web": "/web/x" is file x). Returns 0, or -1 and a message.
 */
int static_root_init(struct static_root *r, const char *dir, const char *mount,
                     char *err, size_t errlen);

enum static_path_rc {
	STATIC_PATH_OK = 0,
	STATIC_PATH_BAD,     /* can never name a file: 400 */
	STATIC_PATH_OUTSIDE, /* not under the mount: 404 */
};

/*
 * Pure: checks URL path `path` of `len` bytes (which may hold a NUL, as a
 * decoded %00 would) and writes the file's path relative to the root into
 * rel ("js/fmt.js"; "index.html" for "/", the mount and "dir/"). On
 * STATIC_PATH_BAD, why says what is wrong.
 */
enum static_path_rc static_clean_path(const char *mount, const char *path,
                                      size_t len, char *rel, size_t relcap,
                                      char *why, size_t whylen);

/* The content type for a file name, by its extension. */
const char *static_content_type(const char *name);

/* What static_get found: a reply, body owned by it. */
struct static_reply {
	int status;        /* 200, 304, 400, 404, 405, 500 */
	const char *ctype; /* for 200 and 304 */
	char *body;        /* malloc'd file contents (200 only) */
	size_t len;
	char etag[48];            /* with its quotes, for 200 and 304 */
	int is_page;              /* text/html: gets the CSP header */
	char why[STATIC_MSG_MAX]; /* detail for an error status */
};

/*
 * Looks up `path` (len bytes) for `method` (GET or HEAD) under root and
 * fills *rep; if_none_match may be NULL. Returns rep->status. The caller
 * always calls static_reply_clear.
 */
int static_get(const struct static_root *root, const char *method,
               const char *path, size_t len, const char *if_none_match,
               struct static_reply *rep);
void static_reply_clear(struct static_reply *rep);

struct http_req;
/*
 * A route handler's whole body: serves http_path(rq) from root and replies
 * (exactly once). For the route table: GET and HEAD on "/" and the mount's
 * patterns, public.
 */
void static_serve(struct http_req *rq, const struct static_root *root);

/* The route handler: serves from the app's root (app.h), or answers 404
 * with how to turn the pages on when ramexd runs without --web_root. */
void h_web(struct http_req *rq);

#endif
