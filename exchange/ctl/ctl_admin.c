/*
 * ctl_admin.c — ramexctl's administration commands; see ctl_admin.h.
 */
#include "exchange/ctl/ctl_admin.h"
#include "exchange/ctl/ctl_out.h"
#include "exchange/ctl/ctl_units.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int ctl_admin_teams_create(struct ctl_ctx *x, struct ctl_opts *o)
{
	return ctl_call_show(x, "POST", "/v1/teams",
	                     json_pack("{s:s}", "name", o->pos[0]), NULL);
}

int ctl_admin_teams_list(struct ctl_ctx *x, struct ctl_opts *o)
{
	static const char *const cols[] = {"id", "name", NULL};
	(void)o;
	return ctl_call_show(x, "GET", "/v1/teams", NULL, cols);
}

int ctl_admin_accounts_create(struct ctl_ctx *x, struct ctl_opts *o)
{
	const char *kind = ctl_opt(o, "--kind");
	if (!kind)
		return ctl_usage_error(
		    "--kind is required (operator or exchange)");
	json_t *b = json_pack("{s:s,s:s}", "name", o->pos[0], "kind", kind);
	return ctl_call_show(x, "POST", "/v1/accounts", b, NULL);
}

int ctl_admin_accounts_list(struct ctl_ctx *x, struct ctl_opts *o)
{
	static const char *const cols[] = {"id", "name", "kind", "team_id",
	                                   NULL};
	char p[256] = "/v1/accounts";
	ctl_add_query(p, sizeof p, "kind", ctl_opt(o, "--kind"));
	return ctl_call_show(x, "GET", p, NULL, cols);
}

/* The node's secret is shown once: the server keeps only what it needs to
 * check signatures and cannot show it again. */
static int show_secret(struct ctl_ctx *x, const char *path, json_t *b)
{
	json_t *j = NULL;
	int rc = ctl_call(x, "POST", path, b, &j);
	json_decref(b);
	if (rc)
		return rc;
	if (x->json) {
		ctl_print_json(j);
	} else {
		json_t *a = json_object_get(j, "account");
		if (a)
			ctl_print_object(a);
		ctl_print_object(j);
	}
	json_decref(j);
	return CTL_OK;
}

static const char *const node_cols[] = {"id",
                                        "name",
                                        "team_name",
                                        "trading_paused",
                                        "trading_paused_by_name",
                                        "trading_paused_at",
                                        "trading_pause_note",
                                        NULL};

int ctl_admin_nodes_list(struct ctl_ctx *x, struct ctl_opts *o)
{
	(void)o;
	return ctl_call_show(x, "GET", "/v1/nodes", NULL, node_cols);
}

/* A node by id or by name (GET /v1/nodes lists the ones the caller may
 * trade for); 0 with *id set, else an exit code after saying why. */
static int node_id(struct ctl_ctx *x, const char *arg, char *id, size_t len)
{
	int64_t v;
	json_t *j = NULL, *n;
	size_t i;
	if (ctl_units_parse_int(arg, &v) == 0 && v > 0) {
		snprintf(id, len, "%lld", (long long)v);
		return 0;
	}
	int rc = ctl_call(x, "GET", "/v1/nodes", NULL, &j);
	if (rc)
		return rc;
	rc = CTL_REFUSED;
	json_array_foreach(json_object_get(j, "items"), i, n)
	{
		const char *name =
		    json_string_value(json_object_get(n, "name"));
		if (name && !strcmp(name, arg)) {
			snprintf(id, len, "%lld",
			         (long long)json_integer_value(
			             json_object_get(n, "id")));
			rc = 0;
			break;
		}
	}
	json_decref(j);
	if (rc)
		fprintf(stderr,
		        "error: no node named \"%s\" that you may see (%s "
		        "nodes list shows them)\n",
		        arg, ctl_prog);
	return rc;
}

static int node_move(struct ctl_ctx *x, struct ctl_opts *o, const char *verb)
{
	char p[256], id[24];
	const char *note = ctl_opt(o, "--note");
	if (!ctl_segment_ok(o->pos[0]))
		return ctl_usage_error("\"%s\" is not a node name or id",
		                       o->pos[0]);
	if (note && (strlen(note) == 0 || strlen(note) > 200))
		return ctl_usage_error("--note has %zu characters; 1 to 200",
		                       strlen(note));
	int rc = node_id(x, o->pos[0], id, sizeof id);
	if (rc)
		return rc;
	snprintf(p, sizeof p, "/v1/nodes/%s/%s", id, verb);
	return ctl_call_show(
	    x, "POST", p, note ? json_pack("{s:s}", "note", note) : NULL, NULL);
}

int ctl_admin_nodes_pause(struct ctl_ctx *x, struct ctl_opts *o)
{
	return node_move(x, o, "pause");
}

int ctl_admin_nodes_resume(struct ctl_ctx *x, struct ctl_opts *o)
{
	return node_move(x, o, "resume");
}

int ctl_admin_nodes_create(struct ctl_ctx *x, struct ctl_opts *o)
{
	json_t *b = json_pack("{s:s}", "name", o->pos[0]);
	int rc = ctl_int_opt(o, "--team", b, "team_id", 1);
	if (rc) {
		json_decref(b);
		return rc;
	}
	return show_secret(x, "/v1/nodes", b);
}

int ctl_admin_keys_create(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256];
	if (ctl_path_id(p, sizeof p, "/v1/nodes/%s/keys", o->pos[0],
	                "a node id"))
		return CTL_USAGE;
	return show_secret(x, p, json_object());
}

int ctl_admin_keys_revoke(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256];
	if (ctl_path1(p, sizeof p, "/v1/keys/%s", o->pos[0]))
		return CTL_USAGE;
	return ctl_call_show(x, "DELETE", p, NULL, NULL);
}

int ctl_admin_tokens_create(struct ctl_ctx *x, struct ctl_opts *o)
{
	const char *role = ctl_opt(o, "--role");
	if (!role)
		return ctl_usage_error("--role is required (node, trader, "
		                       "operator, finance or admin)");
	json_t *b = json_pack("{s:s,s:s}", "name", o->pos[0], "role", role);
	int rc;
	if ((rc = ctl_int_opt(o, "--team", b, "team_id", 0)) ||
	    (rc = ctl_int_opt(o, "--account", b, "account_id", 0))) {
		json_decref(b);
		return rc;
	}
	json_t *j = NULL;
	rc = ctl_call(x, "POST", "/v1/tokens", b, &j);
	json_decref(b);
	if (rc)
		return rc;
	if (x->json)
		ctl_print_json(j);
	else
		ctl_print_object(
		    j); /* the server's note says it is shown once */
	json_decref(j);
	return CTL_OK;
}

int ctl_admin_tokens_list(struct ctl_ctx *x, struct ctl_opts *o)
{
	static const char *const cols[] = {"id",         "name",       "role",
	                                   "team_id",    "account_id", "prefix",
	                                   "revoked_at", NULL};
	(void)o;
	return ctl_call_show(x, "GET", "/v1/tokens", NULL, cols);
}

int ctl_admin_tokens_revoke(struct ctl_ctx *x, struct ctl_opts *o)
{
	char p[256];
	if (ctl_path_id(p, sizeof p, "/v1/tokens/%s", o->pos[0], "a token id"))
		return CTL_USAGE;
	return ctl_call_show(x, "DELETE", p, NULL, NULL);
}
