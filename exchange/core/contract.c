/* contract.c — contracts from trades and their state machine; see
 * contract.h for the diagram and the table this file implements. */
#include "exchange/core/contract.h"
#include "common/err.h"

#include "common/money.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The products' rules: the only place that says how spot and perm differ. */
static const struct contract_rules rules[CONTRACT_PRODUCT_COUNT_] = {
    [CONTRACT_SPOT] = {.name = "spot",
                       .recall = CONTRACT_RECALL_NOTICE,
                       .has_term = false,
                       .buyer_may_end = true,
                       .operator_only = false,
                       .settle = CONTRACT_SETTLE_USAGE},
    [CONTRACT_PERM] = {.name = "perm",
                       .recall = CONTRACT_RECALL_BREACH,
                       .has_term = true,
                       .buyer_may_end = false,
                       .operator_only = true,
                       .settle = CONTRACT_SETTLE_TERM},
};

/* The transition table of contract.h, row for row. A RECALL row's `to` is
 * the NOTICE outcome; the product's recall rule may turn it into BREACHED. */
struct step {
	enum contract_state from;
	enum contract_event event;
	enum contract_state to;
};

static const struct step steps[] = {
    {CONTRACT_PENDING_DELIVERY, CONTRACT_EV_DELIVERED, CONTRACT_ACTIVE},
    {CONTRACT_PENDING_DELIVERY, CONTRACT_EV_DELIVERY_LATE, CONTRACT_BREACHED},
    {CONTRACT_PENDING_DELIVERY, CONTRACT_EV_BUYER_END, CONTRACT_ENDED},
    {CONTRACT_ACTIVE, CONTRACT_EV_RECALL, CONTRACT_RECALLING},
    {CONTRACT_ACTIVE, CONTRACT_EV_BUYER_END, CONTRACT_ENDED},
    {CONTRACT_ACTIVE, CONTRACT_EV_TERM_ENDED, CONTRACT_ENDED},
    {CONTRACT_ACTIVE, CONTRACT_EV_BREACH, CONTRACT_BREACHED},
    {CONTRACT_RECALLING, CONTRACT_EV_NOTICE_ENDED, CONTRACT_ENDED},
    {CONTRACT_RECALLING, CONTRACT_EV_BUYER_END, CONTRACT_ENDED},
    {CONTRACT_RECALLING, CONTRACT_EV_BREACH, CONTRACT_BREACHED},
};

/* Who may send each event: a bit per enum contract_actor. */
#define BY(a) (1u << (a))
static const unsigned event_actors[CONTRACT_EV_COUNT_] = {
    [CONTRACT_EV_DELIVERED] = BY(CONTRACT_BY_SELLER),
    [CONTRACT_EV_DELIVERY_LATE] = BY(CONTRACT_BY_EXCHANGE),
    [CONTRACT_EV_RECALL] = BY(CONTRACT_BY_SELLER),
    [CONTRACT_EV_NOTICE_ENDED] = BY(CONTRACT_BY_EXCHANGE),
    [CONTRACT_EV_BUYER_END] = BY(CONTRACT_BY_BUYER),
    [CONTRACT_EV_TERM_ENDED] = BY(CONTRACT_BY_EXCHANGE),
    [CONTRACT_EV_BREACH] = BY(CONTRACT_BY_EXCHANGE) | BY(CONTRACT_BY_ADMIN),
};

static const char *state_names[CONTRACT_STATE_COUNT_] = {
    "pending_delivery", "active", "recalling", "ended", "breached"};
static const char *event_names[CONTRACT_EV_COUNT_] = {
    "delivered", "delivery_late", "recall", "notice_ended",
    "buyer_end", "term_ended",    "breach"};
static const char *actor_names[CONTRACT_ACTOR_COUNT_] = {"seller", "buyer",
                                                         "exchange", "admin"};
static const char *reject_names[CONTRACT_REJ_COUNT_] = {
    "none",         "bad_input", "not_allowed", "wrong_state",
    "product_rule", "too_early", "deadline_due"};

const struct contract_rules *contract_rules_of(enum contract_product p)
{
	assert(p >= 0 && p < CONTRACT_PRODUCT_COUNT_);
	return &rules[p];
}

int contract_open(const struct contract_trade *t,
                  const struct contract_market *m, struct contract *out,
                  char *err, size_t errlen)
{
	if (m->product < 0 || m->product >= CONTRACT_PRODUCT_COUNT_)
		return err_set(err, errlen,
		               "market %lld has an unknown product %d",
		               (long long)m->market_id, (int)m->product);
	const struct contract_rules *r = &rules[m->product];
	if (t->pages <= 0 || t->price <= 0)
		return err_set(
		    err, errlen,
		    "trade %lld has %lld pages at %lld n$/page-year; "
		    "both must be positive",
		    (long long)t->trade_id, (long long)t->pages,
		    (long long)t->price);
	if (t->buyer == t->seller)
		return err_set(err, errlen,
		               "trade %lld has account %lld on both sides",
		               (long long)t->trade_id, (long long)t->buyer);
	if (m->delivery_window <= 0 || m->recall_notice < 0 ||
	    m->breach_penalty < 0)
		return err_set(
		    err, errlen,
		    "market %lld needs a positive delivery window and a "
		    "notice and penalty of at least zero",
		    (long long)m->market_id);
	if (t->now <= 0)
		return err_set(err, errlen, "trade time %lld is not after 1970",
		               (long long)t->now);
	if (r->operator_only && !t->buyer_is_operator)
		return err_set(err, errlen,
		               "%s contracts are bought by the operator only; "
		               "account %lld is a node",
		               r->name, (long long)t->buyer);

	struct contract c = {
	    .id = t->contract_id,
	    .trade_id = t->trade_id,
	    .market_id = m->market_id,
	    .product = m->product,
	    .perm_year = r->has_term ? m->perm_year : 0,
	    .delivery = t->buyer_is_operator ? CONTRACT_OFFLINE : CONTRACT_LEND,
	    .buyer = t->buyer,
	    .seller = t->seller,
	    .pages = t->pages,
	    .price = t->price,
	    .breach_penalty = m->breach_penalty,
	    .recall_notice = m->recall_notice,
	    .state = CONTRACT_PENDING_DELIVERY,
	    .created = t->now,
	    .changed_at = t->now,
	};
	if (!money_add(t->now, m->delivery_window, &c.delivery_deadline))
		return err_set(err, errlen,
		               "market %lld's delivery window does not fit a "
		               "timestamp",
		               (long long)m->market_id);
	if (r->has_term) {
		if (m->perm_year < MONEY_YEAR_MIN ||
		    m->perm_year > MONEY_YEAR_MAX)
			return err_set(
			    err, errlen, "perm year %d is outside %d..%d",
			    m->perm_year, MONEY_YEAR_MIN, MONEY_YEAR_MAX);
		c.term_end = money_month_start(m->perm_year + 1, 1);
		if (c.delivery_deadline >= c.term_end)
			return err_set(
			    err, errlen,
			    "perm-%d ends before its delivery deadline; "
			    "trade the next year instead",
			    m->perm_year);
	}
	*out = c;
	return 0;
}

bool contract_due(const struct contract *c, enum contract_event *ev,
                  rx_time_ns *at)
{
	switch (c->state) {
	case CONTRACT_PENDING_DELIVERY:
		*ev = CONTRACT_EV_DELIVERY_LATE;
		*at = c->delivery_deadline;
		return true;
	case CONTRACT_ACTIVE:
		if (!rules[c->product].has_term)
			return false;
		*ev = CONTRACT_EV_TERM_ENDED;
		*at = c->term_end;
		return true;
	case CONTRACT_RECALLING:
		*ev = CONTRACT_EV_NOTICE_ENDED;
		*at = c->notice_end;
		return true;
	default:
		return false;
	}
}

bool contract_delivery_span(const struct contract *c, rx_time_ns now,
                            rx_time_ns *from, rx_time_ns *to)
{
	if (c->delivered_at == 0)
		return false;
	*from = c->delivered_at;
	*to = c->ended_at ? c->ended_at : now;
	if (*to < *from)
		*to = *from;
	return true;
}

static enum contract_reject refuse(char msg[CONTRACT_MSG_MAX],
                                   enum contract_reject r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum contract_reject refuse(char msg[CONTRACT_MSG_MAX],
                                   enum contract_reject r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, CONTRACT_MSG_MAX, fmt, ap);
	va_end(ap);
	return r;
}

/* Checks who sent the command; the account must match the role. */
static enum contract_reject check_actor(const struct contract *c,
                                        const struct contract_cmd *cmd,
                                        char msg[CONTRACT_MSG_MAX])
{
	const char *ev = event_names[cmd->event];
	if (!(event_actors[cmd->event] & BY(cmd->actor)))
		return refuse(msg, CONTRACT_REJ_NOT_ALLOWED,
		              "the %s may not send %s to contract %lld",
		              actor_names[cmd->actor], ev, (long long)c->id);
	if (cmd->actor == CONTRACT_BY_SELLER && cmd->actor_account != c->seller)
		return refuse(msg, CONTRACT_REJ_NOT_ALLOWED,
		              "account %lld is not the seller of contract %lld",
		              (long long)cmd->actor_account, (long long)c->id);
	if (cmd->actor == CONTRACT_BY_BUYER && cmd->actor_account != c->buyer)
		return refuse(msg, CONTRACT_REJ_NOT_ALLOWED,
		              "account %lld is not the buyer of contract %lld",
		              (long long)cmd->actor_account, (long long)c->id);
	return CONTRACT_REJ_NONE;
}

/* A sentence for the record: what happened, then the caller's note. */
static void describe(const struct contract *c, const struct contract_cmd *cmd,
                     enum contract_state to, char why[CONTRACT_MSG_MAX])
{
	const char *what;
	switch (cmd->event) {
	case CONTRACT_EV_DELIVERED:
		what = "seller confirmed delivery";
		break;
	case CONTRACT_EV_DELIVERY_LATE:
		what = "seller did not confirm delivery by the deadline";
		break;
	case CONTRACT_EV_RECALL:
		what = to == CONTRACT_BREACHED
		           ? "seller took the pages back before the end of term"
		           : "seller recalled the pages; the buyer has notice";
		break;
	case CONTRACT_EV_NOTICE_ENDED:
		what = "recall notice ended";
		break;
	case CONTRACT_EV_BUYER_END:
		what = "buyer released the pages";
		break;
	case CONTRACT_EV_TERM_ENDED:
		what = "term ended with the pages delivered";
		break;
	default:
		what = "found in breach";
		break;
	}
	if (cmd->note && *cmd->note)
		snprintf(why, CONTRACT_MSG_MAX, "%s (%lld pages): %.*s", what,
		         (long long)c->pages, CONTRACT_NOTE_MAX, cmd->note);
	else
		snprintf(why, CONTRACT_MSG_MAX, "%s (%lld pages)", what,
		         (long long)c->pages);
}

enum contract_reject contract_apply(struct contract *c,
                                    const struct contract_cmd *cmd,
                                    struct contract_transition *out,
                                    char msg[CONTRACT_MSG_MAX])
{
	assert(c->state >= 0 && c->state < CONTRACT_STATE_COUNT_);
	if (cmd->event < 0 || cmd->event >= CONTRACT_EV_COUNT_ ||
	    cmd->actor < 0 || cmd->actor >= CONTRACT_ACTOR_COUNT_)
		return refuse(msg, CONTRACT_REJ_BAD_INPUT,
		              "unknown event %d or actor %d", (int)cmd->event,
		              (int)cmd->actor);
	const char *ev = event_names[cmd->event];
	const struct contract_rules *r = &rules[c->product];

	enum contract_reject rej = check_actor(c, cmd, msg);
	if (rej != CONTRACT_REJ_NONE)
		return rej;
	if (cmd->now < c->changed_at)
		return refuse(
		    msg, CONTRACT_REJ_BAD_INPUT,
		    "%s at %lld is before contract %lld's last change "
		    "at %lld; the clock went backwards",
		    ev, (long long)cmd->now, (long long)c->id,
		    (long long)c->changed_at);

	const struct step *s = NULL;
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
		if (steps[i].from == c->state && steps[i].event == cmd->event)
			s = &steps[i];
	if (!s)
		return refuse(msg, CONTRACT_REJ_WRONG_STATE,
		              "contract %lld is %s; %s is not possible now",
		              (long long)c->id, state_names[c->state], ev);

	/* Deadlines first: a passed deadline decides before anything else. */
	enum contract_event due_ev;
	rx_time_ns due_at;
	bool due = contract_due(c, &due_ev, &due_at);
	if (due && cmd->event == due_ev && cmd->now < due_at)
		return refuse(msg, CONTRACT_REJ_TOO_EARLY,
		              "%s for contract %lld is due at %lld, not before",
		              ev, (long long)c->id, (long long)due_at);
	if (due && cmd->event != due_ev && cmd->now >= due_at)
		return refuse(msg, CONTRACT_REJ_DEADLINE_DUE,
		              "contract %lld passed its %s deadline at %lld; "
		              "that decides first",
		              (long long)c->id, event_names[due_ev],
		              (long long)due_at);
	if (cmd->event == CONTRACT_EV_TERM_ENDED && !r->has_term)
		return refuse(msg, CONTRACT_REJ_PRODUCT_RULE,
		              "%s contracts have no term", r->name);

	enum contract_state to = s->to;
	if (cmd->event == CONTRACT_EV_BUYER_END && !r->buyer_may_end)
		return refuse(msg, CONTRACT_REJ_PRODUCT_RULE,
		              "a %s contract runs to the end of its term; the "
		              "buyer cannot end contract %lld early",
		              r->name, (long long)c->id);
	if (cmd->event == CONTRACT_EV_RECALL &&
	    r->recall == CONTRACT_RECALL_BREACH)
		to = CONTRACT_BREACHED;

	struct contract n = *c;
	n.state = to;
	n.changed_at = cmd->now;
	if (cmd->event == CONTRACT_EV_DELIVERED)
		n.delivered_at = cmd->now;
	if (to == CONTRACT_RECALLING &&
	    !money_add(cmd->now, c->recall_notice, &n.notice_end))
		return refuse(msg, CONTRACT_REJ_BAD_INPUT,
		              "recall notice of contract %lld does not fit a "
		              "timestamp",
		              (long long)c->id);
	if (to == CONTRACT_ENDED || to == CONTRACT_BREACHED)
		n.ended_at = cmd->now;
	/* created > 0 and time never goes back, so 0 means "never". */
	assert(n.state != CONTRACT_ACTIVE || n.delivered_at > 0);

	struct contract_transition t = {
	    .contract_id = c->id,
	    .from = c->state,
	    .to = to,
	    .event = cmd->event,
	    .actor = cmd->actor,
	    .actor_account = cmd->actor_account,
	    .at = cmd->now,
	};
	describe(c, cmd, to, t.why);
	*c = n;
	*out = t;
	msg[0] = 0;
	return CONTRACT_REJ_NONE;
}

const char *contract_state_name(enum contract_state s)
{
	return s >= 0 && s < CONTRACT_STATE_COUNT_ ? state_names[s] : "unknown";
}

const char *contract_event_name(enum contract_event e)
{
	return e >= 0 && e < CONTRACT_EV_COUNT_ ? event_names[e] : "unknown";
}

const char *contract_actor_name(enum contract_actor a)
{
	return a >= 0 && a < CONTRACT_ACTOR_COUNT_ ? actor_names[a] : "unknown";
}

const char *contract_product_name(enum contract_product p)
{
	return p >= 0 && p < CONTRACT_PRODUCT_COUNT_ ? rules[p].name
	                                             : "unknown";
}

const char *contract_delivery_name(enum contract_delivery d)
{
	return d == CONTRACT_OFFLINE ? "offline"
	       : d == CONTRACT_LEND  ? "lend"
	                             : "unknown";
}

const char *contract_reject_name(enum contract_reject r)
{
	return r >= 0 && r < CONTRACT_REJ_COUNT_ ? reject_names[r] : "unknown";
}

static int lookup(const char *const *names, int n, const char *s)
{
	for (int i = 0; s && i < n; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -1;
}

int contract_state_parse(const char *s)
{
	return lookup(state_names, CONTRACT_STATE_COUNT_, s);
}

int contract_event_parse(const char *s)
{
	return lookup(event_names, CONTRACT_EV_COUNT_, s);
}
