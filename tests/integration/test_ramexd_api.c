/*
 * test_ramexd_api.c — the route table, api/openapi.yaml and the server
 * agree: every route is described with its roles and every described
 * operation is a route; and a walk of every route x every role against a
 * real ramexd shows deny by default (401 without credentials, 403 for a
 * role the table does not name, never either for one it names).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/auth.h"
#include "exchange/routes.h"
#include "tests/integration/ramexd_harness.h"

struct op {
	char method[8];
	char path[128];
	unsigned roles;
	char query[256]; /* its query parameters, " a b c " */
};

/* Adds the query parameters named on one line of an operation: inline
 * ({name: x, in: query ...}) or the shared Limit and Before. */
static void add_query(struct op *o, const char *line)
{
	size_t n = strlen(o->query);
	const char *p = line;
	while ((p = strstr(p, "{name: "))) {
		p += 7;
		size_t len = strcspn(p, ",");
		if (strncmp(p + len, ", in: query", 11) == 0)
			n += (size_t)snprintf(o->query + n, sizeof o->query - n,
			                      "%.*s ", (int)len, p);
	}
	if (strstr(line, "#/components/parameters/Limit"))
		n += (size_t)snprintf(o->query + n, sizeof o->query - n,
		                      "limit ");
	if (strstr(line, "#/components/parameters/Before"))
		snprintf(o->query + n, sizeof o->query - n, "before ");
}

static unsigned parse_roles(const char *list)
{
	static const char *names[] = {"node", "trader", "operator", "finance",
	                              "admin"};
	unsigned r = 0;
	if (strstr(list, "public"))
		r |= AUTH_PUBLIC;
	for (int i = 0; i < 5; i++) {
		const char *p = list;
		size_t n = strlen(names[i]);
		while ((p = strstr(p, names[i]))) {
			if ((p == list || p[-1] == '[' || p[-1] == ' ' ||
			     p[-1] == ',') &&
			    (p[n] == ',' || p[n] == ']'))
				r |= 1u << i;
			p += n;
		}
	}
	return r;
}

/* Reads the operations of api/openapi.yaml by its indentation: paths at
 * two spaces, methods at four, x-ramex-roles at six. */
static int read_spec(struct op *ops, int max)
{
	FILE *f = fopen("api/openapi.yaml", "r");
	char line[1024], path[128] = "";
	int n = 0;
	ck_assert_msg(f, "api/openapi.yaml not found (run from the repo root)");
	int in_paths = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (strcmp(line, "paths:") == 0) {
			in_paths = 1;
			continue;
		}
		if (in_paths && line[0] != ' ' && line[0])
			in_paths = 0;
		if (!in_paths)
			continue;
		if (strncmp(line, "  /", 3) == 0) {
			snprintf(path, sizeof path, "%.*s",
			         (int)(strlen(line) - 3), line + 2);
			continue;
		}
		static const char *methods[] = {"get",   "post",   "put",
		                                "patch", "delete", "head"};
		for (int m = 0; m < 6; m++) {
			char want[16];
			snprintf(want, sizeof want, "    %s:", methods[m]);
			if (strcmp(line, want) == 0 && n < max) {
				for (int k = 0; methods[m][k]; k++)
					ops[n].method[k] =
					    (char)(methods[m][k] - 32);
				ops[n].method[strlen(methods[m])] = 0;
				snprintf(ops[n].path, sizeof ops[n].path, "%s",
				         path);
				ops[n].roles = 0;
				snprintf(ops[n].query, sizeof ops[n].query,
				         " ");
				n++;
			}
		}
		const char *rl = strstr(line, "      x-ramex-roles:");
		if (rl == line && n > 0)
			ops[n - 1].roles = parse_roles(line);
		else if (n > 0 && strncmp(line, "      ", 6) == 0)
			add_query(&ops[n - 1], line);
	}
	fclose(f);
	return n;
}

START_TEST(openapi_matches_route_table)
{
	static struct op ops[256];
	int n = read_spec(ops, 256);
	ck_assert_int_gt(n, 0);
	for (size_t i = 0; i < routes_count; i++) {
		const struct http_route *r = &routes_table[i];
		int found = 0;
		for (int k = 0; k < n; k++) {
			if (strcmp(ops[k].method, r->method) ||
			    strcmp(ops[k].path, r->pattern))
				continue;
			found = 1;
			ck_assert_msg(
			    ops[k].roles == r->roles,
			    "%s %s: roles in openapi.yaml %#x, in the "
			    "route table %#x",
			    r->method, r->pattern, ops[k].roles, r->roles);
			/* the query parameters the edge lets through are the
			 * described ones ("*": the web pages, any) */
			const char *names = NULL;
			for (size_t j = 0; j < routes_query_count; j++)
				if (!strcmp(routes_query[j].method,
				            r->method) &&
				    !strcmp(routes_query[j].pattern,
				            r->pattern))
					names = routes_query[j].names;
			if (names && strcmp(names, "*") == 0)
				continue;
			char mine[256] = " ";
			int count = 0;
			for (const char *q = names; q && *q;) {
				size_t len = strcspn(q, " ");
				char one[64];
				snprintf(one, sizeof one, " %.*s ", (int)len,
				         q);
				ck_assert_msg(
				    strstr(ops[k].query, one),
				    "%s %s reads query parameter%s, "
				    "which openapi.yaml does not list",
				    r->method, r->pattern, one);
				strncat(mine, one + 1,
				        sizeof mine - strlen(mine) - 1);
				count++;
				q += len;
				q += strspn(q, " ");
			}
			int described = 0;
			for (const char *q = ops[k].query; *q; q++)
				described += *q == ' ' && q[1];
			ck_assert_msg(count == described,
			              "%s %s: openapi.yaml lists the query "
			              "parameters%s, the route table%s",
			              r->method, r->pattern, ops[k].query,
			              mine);
		}
		ck_assert_msg(found, "%s %s is served but not in openapi.yaml",
		              r->method, r->pattern);
	}
	for (int k = 0; k < n; k++) {
		int found = 0;
		for (size_t i = 0; i < routes_count && !found; i++)
			found =
			    !strcmp(ops[k].method, routes_table[i].method) &&
			    !strcmp(ops[k].path, routes_table[i].pattern);
		ck_assert_msg(found, "%s %s is in openapi.yaml but not served",
		              ops[k].method, ops[k].path);
	}
}
END_TEST

START_TEST(every_route_every_role)
{
	struct rxh h;
	struct rxh_world w;
	rxh_start(&h, "ramex_t_rxd_routes", "");
	rxh_world(&h, &w);
	const char *tokens[5] = {NULL, w.trader_token, w.op_token,
	                         w.finance_token, h.admin};
	int checked = 0;
	for (size_t i = 0; i < routes_count; i++) {
		const struct http_route *rt = &routes_table[i];
		char path[256] = "";
		/* fill {params} with ids that do not exist */
		for (const char *p = rt->pattern; *p;) {
			size_t n = strlen(path);
			if (*p == '{') {
				const char *e = strchr(p, '}');
				const char *v = strncmp(p, "{name}", 6) == 0
				                    ? "spot"
				                : strncmp(p, "{key_id}", 8) == 0
				                    ? "nk_0000000000000000"
				                    : "999999";
				snprintf(path + n, sizeof path - n, "%s", v);
				p = e + 1;
			} else {
				path[n] = *p++;
				path[n + 1] = 0;
			}
		}
		const char *body =
		    strcmp(rt->method, "POST") == 0 ? "{}" : NULL;
		for (int who = -1; who < 5; who++) {
			unsigned role = who < 0 ? 0 : 1u << who;
			int allowed = (rt->roles & AUTH_PUBLIC) ||
			              (role && (rt->roles & role));
			/* an allowed event stream never ends; it is tested
			 * in test_ramexd */
			if (allowed && strcmp(rt->pattern, "/v1/events") == 0)
				continue;
			struct rxh_resp r;
			long s;
			if (who == 0)
				s = rxh_call_signed(&h, rt->method, path,
				                    w.key_a, w.secret_a, body,
				                    0, NULL, &r);
			else
				s = rxh_call(&h, rt->method, path,
				             who < 0 ? NULL : tokens[who], body,
				             NULL, &r);
			const char *title =
			    r.json ? json_string_value(
			                 json_object_get(r.json, "title"))
			           : NULL;
			int role_denied = s == 403 && title &&
			                  !strcmp(title, "role not allowed");
			if (allowed)
				ck_assert_msg(
				    s != 401 && !role_denied,
				    "%s %s as %s: %ld %s", rt->method, path,
				    who < 0 ? "nobody" : auth_role_name(role),
				    s, r.body);
			else if (who < 0)
				ck_assert_msg(s == 401,
				              "%s %s unauthenticated: %ld",
				              rt->method, path, s);
			else
				ck_assert_msg(role_denied,
				              "%s %s as %s: %ld %s", rt->method,
				              path, auth_role_name(role), s,
				              r.body);
			ck_assert_msg(s < 500, "%s %s: %ld %s", rt->method,
			              path, s, r.body);
			rxh_resp_free(&r);
			checked++;
		}
	}
	ck_assert_int_gt(checked, (int)routes_count * 5);
	rxh_stop(&h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ramexd_api");
	TCase *tc = tcase_create("api");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, openapi_matches_route_table);
	tcase_add_test(tc, every_route_every_role);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
