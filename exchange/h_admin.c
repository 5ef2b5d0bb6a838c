/* h_admin.c — teams, accounts, nodes, keys and tokens; see handlers.h.
 * Only the admin reaches these (routes.c), except the reads that finance
 * and the operator share. */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/sign.h"
#include "exchange/app.h"
#include "exchange/auth.h"
#include "exchange/db.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/input.h"
#include "exchange/seal.h"

/* Runs one statement with the pool and replies with its rows (status
 * `ok`): 409 on a unique violation, 422 on a foreign key or check, in the
 * exchange's words (handlers_db_refused). */
static void exec_reply(struct http_req *rq, int ok, const char *sql, int n,
                       const char *const *pv, int single)
{
	struct app *a = http_app(rq);
	struct db_fail f;
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		http_db_unavailable(rq);
		return;
	}
	PGresult *r = db_exec_fail(c, PGRES_TUPLES_OK, sql, n, pv, &f);
	if (!r) {
		handlers_db_refused(rq, c, &f);
		db_release(a->pool, c);
		return;
	}
	db_release(a->pool, c);
	if (single) {
		json_t *rows = db_rows_json(r);
		if (json_array_size(rows) == 0)
			http_problem(rq, 404, "not-found", "not found",
			             "there is no such object");
		else
			http_reply_json(rq, ok,
			                json_incref(json_array_get(rows, 0)));
		json_decref(rows);
	} else {
		handlers_reply_rows(rq, r, 0, NULL);
	}
	PQclear(r);
}

void h_team_create(struct http_req *rq)
{
	static const char *const known[] = {"name", NULL};
	char name[64];
	json_t *b = http_body_object(rq);
	if (!b)
		return;
	if (in_known(rq, b, known) < 0 ||
	    in_name(rq, b, "name", name, sizeof name) < 0)
		goto out;
	const char *pv[] = {name};
	exec_reply(rq, 201,
	           "INSERT INTO teams (name) VALUES ($1) RETURNING id, name", 1,
	           pv, 1);
out:
	json_decref(b);
}

void h_team_list(struct http_req *rq)
{
	exec_reply(rq, 200, "SELECT id, name FROM teams ORDER BY id", 0, NULL,
	           0);
}

void h_account_create(struct http_req *rq)
{
	static const char *const known[] = {"name", "kind", "team_id", NULL};
	char name[64], kind[16];
	int64_t team_id = 0;
	json_t *b = http_body_object(rq);
	if (!b)
		return;
	if (in_known(rq, b, known) < 0 ||
	    in_name(rq, b, "name", name, sizeof name) < 0 ||
	    in_str(rq, b, "kind", true, true, kind, sizeof kind) < 0 ||
	    in_int(rq, b, "team_id", false, 1, IN_ID_MAX, &team_id) < 0)
		goto out;
	if (strcmp(kind, "operator") && strcmp(kind, "exchange")) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "kind: must be operator or exchange; create nodes "
		             "with POST /v1/nodes");
		goto out;
	}
	/* a team's traders act for its accounts: only nodes belong to one
	 * (schema 0012 says so too) */
	if (team_id) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "team_id: %s accounts belong to no team; only "
		             "nodes do (create them with POST /v1/nodes)",
		             kind);
		goto out;
	}
	const char *pv[] = {name, kind, NULL};
	exec_reply(rq, 201,
	           "INSERT INTO accounts (name, kind, team_id) VALUES ($1, $2, "
	           "$3) RETURNING id, name, kind, team_id",
	           3, pv, 1);
out:
	json_decref(b);
}

void h_account_list(struct http_req *rq)
{
	static const char *const kinds[] = {"node", "operator", "exchange",
	                                    NULL};
	const char *kind = NULL;
	if (in_qenum(rq, "kind", kinds, &kind) < 0)
		return;
	const char *pv[] = {kind};
	exec_reply(
	    rq, 200,
	    "SELECT id, name, kind, team_id FROM accounts WHERE ($1::text "
	    "IS NULL OR kind = $1) ORDER BY id",
	    1, pv, 0);
}

/* Inserts a key for `account` and returns the answer (the secret only
 * now), or NULL after replying with the error. */
static json_t *new_key(struct http_req *rq, PGconn *c, const char *account,
                       json_t *acct)
{
	char key_id[20], secret[69];
	struct db_fail f;
	if (auth_node_key_new(key_id, secret) < 0) {
		http_problem(rq, 500, "internal", "no randomness",
		             "could not draw random bytes for the key");
		return NULL;
	}
	/* only sealed in the database: a dump or a replica cannot sign */
	struct app *a = http_app(rq);
	char sealed[SEAL_TEXT_MAX], aad[40];
	snprintf(aad, sizeof aad, "node_key:%s", key_id);
	if (seal_seal(a->seal, secret, aad, sealed) < 0) {
		http_problem(rq, 500, "internal", "could not seal the secret",
		             "the exchange could not seal the new key's secret "
		             "(OpenSSL failed); retry");
		return NULL;
	}
	const char *pv[] = {key_id, account, sealed};
	PGresult *r = db_exec_fail(c, PGRES_COMMAND_OK,
	                           "INSERT INTO node_keys (key_id, account_id, "
	                           "secret_sealed) VALUES ($1, $2, $3)",
	                           3, pv, &f);
	if (!r) {
		handlers_db_refused(rq, c, &f);
		return NULL;
	}
	PQclear(r);
	auth_known(a->auth, key_id);
	json_t *ans = json_pack("{s:s,s:s,s:s}", "key_id", key_id, "secret",
	                        secret, "note",
	                        "the secret is shown only now; give it to the "
	                        "node agent");
	if (acct)
		json_object_set(ans, "account", acct);
	return ans;
}

void h_node_create(struct http_req *rq)
{
	static const char *const known[] = {"name", "team_id", NULL};
	struct app *a = http_app(rq);
	char name[64], team[24], err[512];
	struct db_fail f;
	int64_t team_id = 0;
	json_t *b = http_body_object(rq);
	if (!b)
		return;
	if (in_known(rq, b, known) < 0 ||
	    in_name(rq, b, "name", name, sizeof name) < 0 ||
	    in_int(rq, b, "team_id", true, 1, IN_ID_MAX, &team_id) < 0)
		goto out;
	snprintf(team, sizeof team, "%lld", (long long)team_id);
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		http_db_unavailable(rq);
		goto out;
	}
	/* account and key in one transaction: no node without a key */
	PQclear(PQexec(c, "BEGIN"));
	const char *pv[] = {name, team};
	PGresult *r = db_exec_fail(
	    c, PGRES_TUPLES_OK,
	    "INSERT INTO accounts (name, kind, team_id) VALUES ($1, 'node', "
	    "$2) RETURNING id, name, kind, team_id",
	    2, pv, &f);
	if (!r) {
		PQclear(PQexec(c, "ROLLBACK"));
		if (strcmp(f.state, "23505") == 0)
			http_problem(rq, 409, "conflict", "already exists",
			             "an account named %s exists already",
			             name);
		else if (strcmp(f.state, "23503") == 0)
			http_problem(rq, 422, "invalid", "no such team",
			             "team_id: there is no team %lld",
			             (long long)team_id);
		else
			handlers_db_refused(rq, c, &f);
		db_release(a->pool, c);
		goto out;
	}
	json_t *rows = db_rows_json(r);
	char id[24];
	snprintf(id, sizeof id, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	json_t *ans = new_key(rq, c, id, json_array_get(rows, 0));
	json_decref(rows);
	if (!ans) {
		PQclear(PQexec(c, "ROLLBACK"));
		db_release(a->pool, c);
		goto out;
	}
	/* reply only once the account and its key are committed */
	r = db_exec(c, PGRES_COMMAND_OK, "COMMIT", 0, NULL, err, sizeof err);
	if (!r) {
		json_decref(ans);
		handlers_db_error(rq, c, err);
	} else {
		PQclear(r);
		http_reply_json(rq, 201, ans);
	}
	db_release(a->pool, c);
out:
	json_decref(b);
}

void h_node_key_create(struct http_req *rq)
{
	struct app *a = http_app(rq);
	int64_t id;
	char ids[24], err[512];
	if (in_pid(rq, "id", &id) < 0)
		return;
	if (in_no_fields(rq) < 0)
		return;
	snprintf(ids, sizeof ids, "%lld", (long long)id);
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		http_db_unavailable(rq);
		return;
	}
	const char *pv[] = {ids};
	PGresult *r = db_exec(c, PGRES_TUPLES_OK,
	                      "SELECT 1 FROM accounts WHERE id = $1 AND kind = "
	                      "'node'",
	                      1, pv, err, sizeof err);
	if (!r)
		handlers_db_error(rq, c, err);
	else if (PQntuples(r) == 0)
		http_problem(rq, 404, "not-found", "no such node",
		             "there is no node account %lld", (long long)id);
	else {
		json_t *ans = new_key(rq, c, ids, NULL);
		if (ans)
			http_reply_json(rq, 201, ans);
	}
	PQclear(r);
	db_release(a->pool, c);
}

void h_node_key_revoke(struct http_req *rq)
{
	/* a DELETE's body has no meaning of its own (RFC 9110): read, so
	 * that one that says something is refused, never ignored */
	if (in_no_fields(rq) < 0)
		return;
	const char *pv[] = {http_param(rq, "key_id")};
	exec_reply(rq, 200,
	           "UPDATE node_keys SET revoked_at = now() WHERE key_id = $1 "
	           "AND revoked_at IS NULL RETURNING key_id, account_id, "
	           "revoked_at::text",
	           1, pv, 1);
	/* revoked (or never there): at once in this process, not after the
	 * credential cache's time */
	auth_forget_node_key(((struct app *)http_app(rq))->auth, pv[0]);
}

int64_t handlers_token_create(struct pg_conn *conn, const char *name,
                              const char *role, int64_t team, int64_t account,
                              char token[68], char *err, size_t errlen,
                              struct db_fail *f)
{
	PGconn *c = (PGconn *)conn;
	char sha[65], ts[24], as[24];
	struct db_fail own;
	if (!f)
		f = &own;
	f->state[0] = 0;
	unsigned r_bit = auth_role_parse(role);
	if (!r_bit || r_bit == AUTH_NODE) {
		snprintf(
		    err, errlen,
		    "role must be trader, operator, finance or admin (nodes "
		    "sign with keys)");
		return -1;
	}
	if (r_bit == AUTH_TRADER && !team) {
		snprintf(err, errlen, "a trader token needs team_id");
		return -1;
	}
	if (r_bit != AUTH_TRADER && team) {
		snprintf(err, errlen,
		         "only a trader token belongs to a team; a %s token "
		         "takes no team_id",
		         role);
		return -1;
	}
	/* only an operator acts for one account; any other role's account_id
	 * would be stored and named by whoami while nothing scopes by it (a
	 * finance token reads every account's billing) */
	if (r_bit != AUTH_OPERATOR && account) {
		snprintf(err, errlen,
		         "account_id: only an operator token acts for an "
		         "account; a %s token takes no account_id%s",
		         role,
		         r_bit == AUTH_FINANCE
		             ? " (finance reads every account's billing)"
		             : "");
		return -1;
	}
	if (r_bit == AUTH_OPERATOR && !account) {
		snprintf(err, errlen,
		         "an operator token needs account_id (an operator "
		         "account)");
		return -1;
	}
	if (auth_token_new(token, sha) < 0) {
		snprintf(err, errlen, "could not draw random bytes");
		return -1;
	}
	snprintf(ts, sizeof ts, "%lld", (long long)team);
	snprintf(as, sizeof as, "%lld", (long long)account);
	char prefix[12];
	snprintf(prefix, sizeof prefix, "%.10s", token);
	const char *pv[] = {name, role,  team ? ts : NULL, account ? as : NULL,
	                    sha,  prefix};
	PGresult *r = db_exec_fail(
	    c, PGRES_TUPLES_OK,
	    "INSERT INTO api_tokens (name, role, team_id, account_id, sha256, "
	    "prefix) SELECT $1, $2, $3, $4, $5, $6 WHERE $2 <> 'operator' OR "
	    "EXISTS (SELECT 1 FROM accounts WHERE id = $4::bigint AND kind = "
	    "'operator') RETURNING id",
	    6, pv, f);
	if (!r) {
		snprintf(err, errlen, "%s", f->text);
		return -2;
	}
	if (PQntuples(r) == 0) {
		PQclear(r);
		snprintf(err, errlen, "account %lld is not an operator account",
		         (long long)account);
		return -1;
	}
	int64_t id = db_int(r, 0, 0);
	PQclear(r);
	return id;
}

void h_token_create(struct http_req *rq)
{
	static const char *const known[] = {"name", "role", "team_id",
	                                    "account_id", NULL};
	struct app *a = http_app(rq);
	char name[65], role[16], token[68], err[512];
	struct db_fail f;
	int64_t team = 0, account = 0;
	json_t *b = http_body_object(rq);
	if (!b)
		return;
	if (in_known(rq, b, known) < 0 ||
	    in_str(rq, b, "name", true, false, name, sizeof name) < 0 ||
	    in_str(rq, b, "role", true, true, role, sizeof role) < 0 ||
	    in_int(rq, b, "team_id", false, 1, IN_ID_MAX, &team) < 0 ||
	    in_int(rq, b, "account_id", false, 1, IN_ID_MAX, &account) < 0)
		goto out;
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		http_db_unavailable(rq);
		goto out;
	}
	int64_t id =
	    handlers_token_create((struct pg_conn *)c, name, role, team,
	                          account, token, err, sizeof err, &f);
	if (id == -2) {
		handlers_db_refused(rq, c, &f);
	} else if (id < 0) {
		http_problem(rq, 422, "invalid", "token not created", "%s",
		             err);
	} else {
		char sha[65];
		sign_sha256_hex(token, strlen(token), sha);
		auth_known(a->auth, sha);
		log_info("token created", "id=%lld role=%s", (long long)id,
		         role);
		http_reply_json(rq, 201,
		                json_pack("{s:I,s:s,s:s,s:s}", "id",
		                          (json_int_t)id, "role", role, "token",
		                          token, "note",
		                          "the token is shown only now"));
	}
	db_release(a->pool, c);
out:
	json_decref(b);
}

void h_token_list(struct http_req *rq)
{
	exec_reply(rq, 200,
	           "SELECT id, name, role, team_id, account_id, prefix, "
	           "created_at::text, revoked_at::text FROM api_tokens ORDER "
	           "BY id",
	           0, NULL, 0);
}

void h_token_revoke(struct http_req *rq)
{
	int64_t id;
	char ids[24];
	if (in_pid(rq, "id", &id) < 0 || in_no_fields(rq) < 0)
		return;
	snprintf(ids, sizeof ids, "%lld", (long long)id);
	const char *pv[] = {ids};
	exec_reply(rq, 200,
	           "UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND "
	           "revoked_at IS NULL RETURNING id, revoked_at::text",
	           1, pv, 1);
	auth_forget_token(((struct app *)http_app(rq))->auth, id);
}
