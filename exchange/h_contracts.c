/* h_contracts.c — contracts over HTTP: get, list, the moves (deliver,
 * recall, end, breach) and their transitions; see handlers.h and
 * docs/billing-api.md.
 *
 * Reads are scoped like every other read (handlers_scope: the operator
 * sees every contract). Moves go through contracts_move (contracts.h), which
 * decides in the contract's own transaction whether the caller is the party
 * the move needs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/app.h"
#include "exchange/auth.h"
#include "exchange/contracts.h"
#include "exchange/db.h"
#include "exchange/handlers.h"
#include "exchange/http.h"
#include "exchange/input.h"

static const char *nz(const char *s)
{
	return s && *s ? s : NULL;
}

/* What the caller may see: $1 its account, $2 its team. */
#define SCOPE                                                                  \
	"WHERE ($1::bigint IS NULL OR $1 IN (c.buyer_id, c.seller_id)) AND "   \
	"($2::bigint IS NULL OR EXISTS (SELECT 1 FROM accounts a WHERE "       \
	"a.team_id = $2 AND a.id IN (c.buyer_id, c.seller_id))) "

void h_contract_get(struct http_req *rq)
{
	char acct[24], team[24], ids[24];
	int64_t id;
	if (in_pid(rq, "id", &id) < 0)
		return;
	handlers_scope(rq, 1, acct, team);
	snprintf(ids, sizeof ids, "%lld", (long long)id);
	const char *pv[] = {nz(acct), nz(team), ids};
	handlers_query(rq, CONTRACTS_VIEW SCOPE "AND c.id = $3", 3, pv, 1, 0,
	               "id", "there is no such contract that you may see");
}

void h_contract_list(struct http_req *rq)
{
	static const char *const states[] = {"pending_delivery", "active",
	                                     "recalling",        "ended",
	                                     "breached",         NULL};
	static const char *const roles[] = {"buyer", "seller", NULL};
	const struct auth_principal *p = http_principal(rq);
	char acct[24], team[24], ls[24], bs[24], as[24], sa[24];
	int64_t limit = 100, before = INT64_MAX, account = 0;
	const char *state = NULL, *role = NULL;
	const char *market = http_query(rq, "market");
	if (in_qint(rq, "limit", 1, 500, &limit) < 0 ||
	    in_qint(rq, "before", 1, INT64_MAX, &before) < 0 ||
	    in_qint(rq, "account_id", 1, INT64_MAX, &account) < 0 ||
	    in_qenum(rq, "state", states, &state) < 0 ||
	    in_qenum(rq, "role", roles, &role) < 0)
		return;
	handlers_scope(rq, 1, acct, team);
	/* role=buyer|seller: the side of the caller's own accounts (a node
	 * itself, a trader its team's, the operator its account), or of
	 * account_id for those who see everything. */
	sa[0] = 0;
	if (role) {
		if (account)
			snprintf(sa, sizeof sa, "%lld", (long long)account);
		else if (acct[0])
			snprintf(sa, sizeof sa, "%s", acct);
		else if (p->role == AUTH_OPERATOR)
			snprintf(sa, sizeof sa, "%lld",
			         (long long)p->account_id);
		else if (!team[0]) {
			http_problem(rq, 400, "invalid-parameter",
			             "invalid parameter",
			             "role=%s needs account_id: you see every "
			             "account's contracts, so say whose side "
			             "to list",
			             role);
			return;
		}
	}
	snprintf(ls, sizeof ls, "%lld", (long long)limit);
	snprintf(bs, sizeof bs, "%lld", (long long)before);
	snprintf(as, sizeof as, "%lld", (long long)account);
	const char *pv[] = {nz(acct),
	                    nz(team),
	                    state,
	                    market,
	                    role,
	                    nz(sa),
	                    account ? as : NULL,
	                    bs,
	                    ls};
	handlers_query(
	    rq,
	    CONTRACTS_VIEW SCOPE
	    "AND ($3::text IS NULL OR c.state = $3) AND ($4::text IS NULL OR "
	    "m.name = $4) AND ($5::text IS NULL OR (CASE WHEN $5 = 'buyer' "
	    "THEN c.buyer_id ELSE c.seller_id END) IN (SELECT id FROM accounts "
	    "WHERE ($6::bigint IS NULL OR id = $6) AND ($2::bigint IS NULL OR "
	    "team_id = $2))) AND ($7::bigint IS NULL OR $7 IN (c.buyer_id, "
	    "c.seller_id)) AND c.id < $8 ORDER BY c.id DESC LIMIT $9",
	    9, pv, 0, limit, "id", NULL);
}

/* Every move the same way: an optional {"note": ...}, contracts_move on a
 * pooled connection, and its outcome as HTTP. */
static void move(struct http_req *rq, enum contract_event event,
                 bool note_required)
{
	static const char *const known[] = {"note", NULL};
	struct app *a = http_app(rq);
	const struct auth_principal *p = http_principal(rq);
	char note[IN_NOTE_BUF] = "";
	int64_t id;
	json_t *b = NULL;
	size_t blen = 0;
	if (in_pid(rq, "id", &id) < 0)
		return;
	http_body(rq, &blen);
	if (blen > 0) {
		if (!(b = http_body_object(rq)))
			return;
		if (in_known(rq, b, known) < 0 ||
		    in_note(rq, b, note) < 0)
			goto out;
	}
	if (note_required && !note[0]) {
		http_problem(rq, 400, "invalid-field", "invalid field",
		             "note: is required; say why the contract is in "
		             "breach (at most 200 characters)");
		goto out;
	}
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		http_db_unavailable(rq);
		goto out;
	}
	struct contracts_caller who = {.role = p->role,
	                               .account = p->account_id,
	                               .team = p->team_id,
	                               .principal = p->scope};
	struct contracts_result res;
	contracts_move(c, a->events, &who, id, event, note[0] ? note : NULL,
	               contracts_now(), &res);
	db_release(a->pool, c);
	switch (res.status) {
	case CONTRACTS_MOVED:
		http_reply_json(rq, 200, res.body);
		res.body = NULL;
		break;
	case CONTRACTS_UNCHANGED:
		if (res.body) {
			http_add_header(rq, "Idempotent-Replayed", "true");
			http_reply_json(rq, 200, res.body);
			res.body = NULL;
		} else {
			http_problem(rq, 409, "wrong-state", "move refused",
			             "%s", res.msg);
		}
		break;
	case CONTRACTS_NOT_FOUND:
		http_problem(rq, 404, "not-found", "not found", "%s", res.msg);
		break;
	case CONTRACTS_FORBIDDEN:
		http_problem(rq, 403, "not-party",
		             "not a party to the contract", "%s", res.msg);
		break;
	case CONTRACTS_REFUSED: {
		/* the state machine's reason, as a slug: wrong-state,
		 * deadline-due, product-rule, ... */
		char slug[32];
		snprintf(slug, sizeof slug, "%s",
		         contract_reject_name(res.reject));
		for (char *s = slug; *s; s++)
			if (*s == '_')
				*s = '-';
		http_problem(rq, 409, slug, "move refused", "%s", res.msg);
		break;
	}
	case CONTRACTS_UNAVAILABLE:
		http_db_unavailable(rq);
		break;
	default:
		handlers_internal(rq, "the contract move failed", res.msg);
		break;
	}
	json_decref(res.body);
out:
	json_decref(b);
}

void h_contract_deliver(struct http_req *rq)
{
	move(rq, CONTRACT_EV_DELIVERED, false);
}

void h_contract_recall(struct http_req *rq)
{
	move(rq, CONTRACT_EV_RECALL, false);
}

void h_contract_end(struct http_req *rq)
{
	move(rq, CONTRACT_EV_BUYER_END, false);
}

void h_contract_breach(struct http_req *rq)
{
	move(rq, CONTRACT_EV_BREACH, true);
}

void h_contract_transitions(struct http_req *rq)
{
	struct app *a = http_app(rq);
	char acct[24], team[24], ids[24], err[512];
	int64_t id;
	if (in_pid(rq, "id", &id) < 0)
		return;
	handlers_scope(rq, 1, acct, team);
	snprintf(ids, sizeof ids, "%lld", (long long)id);
	const char *pv[] = {nz(acct), nz(team), ids};
	PGconn *c = db_acquire(a->pool);
	if (!c) {
		http_db_unavailable(rq);
		return;
	}
	/* Seeing the contract is what entitles one to its history; an unseen
	 * contract is a 404, like GET /v1/contracts/{id}. */
	PGresult *r =
	    db_exec(c, PGRES_TUPLES_OK,
	            "SELECT 1 FROM contracts c " SCOPE "AND c.id = $3", 3, pv,
	            err, sizeof err);
	if (!r) {
		handlers_db_error(rq, c, err);
		goto out;
	}
	int seen = PQntuples(r) == 1;
	PQclear(r);
	if (!seen) {
		http_problem(rq, 404, "not-found", "not found",
		             "there is no such contract that you may see");
		goto out;
	}
	r = db_exec(c, PGRES_TUPLES_OK,
	            CONTRACTS_TRANSITION_VIEW
	            "WHERE contract_id = $1 ORDER BY id",
	            1, pv + 2, err, sizeof err);
	if (!r) {
		handlers_db_error(rq, c, err);
		goto out;
	}
	handlers_reply_rows(rq, r, 0, NULL);
	PQclear(r);
out:
	db_release(a->pool, c);
}
