-- Issue 25, two repairs.
--
-- 1. What a usage report bills (docs/money.md, "What a report bills"). A
-- report is admitted with its period a little off the contract's delivery
-- span (USAGE_CLOCK_SLACK), but only the nanoseconds inside the span bill:
-- per contract side, min(reported, floor(pages x delivered ns / 1e9))
-- page-seconds, kept exactly in usage_totals, and each report keeps what it
-- added (billable_ps), which is what the billing job sums by month.
ALTER TABLE usage_reports
    ADD COLUMN delivered_ns bigint NOT NULL DEFAULT 0 CHECK (delivered_ns >= 0),
    ADD COLUMN billable_ps  bigint NOT NULL DEFAULT 0 CHECK (billable_ps >= 0);

CREATE TABLE usage_totals (
    contract_id  bigint NOT NULL,
    side         text NOT NULL CHECK (side IN ('seller', 'buyer')),
    pages        bigint NOT NULL CHECK (pages > 0), -- the contract's
    reported_ps  bigint NOT NULL CHECK (reported_ps >= 0),
    delivered_ns bigint NOT NULL CHECK (delivered_ns >= 0),
    billable_ps  bigint NOT NULL CHECK (billable_ps BETWEEN 0 AND reported_ps),
    PRIMARY KEY (contract_id, side),
    -- the invariant, in page-nanoseconds: never more than was delivered
    CHECK (billable_ps::numeric * 1000000000 <= pages::numeric * delivered_ns)
);

-- The reports stored before: counted again in the order they arrived, by
-- the same rule as exchange/core/usage.c (usage_span, usage_total_add).
-- A contract they over-billed bills the difference back at its next run.
CREATE TEMPORARY TABLE usage_recount ON COMMIT DROP AS
WITH k AS (
    SELECT id, pages, delivered_ns AS d,
           greatest(delivered_ns,
                    CASE WHEN ended_ns > 0 THEN ended_ns
                         ELSE least((extract(epoch FROM clock_timestamp())
                                     * 1000000000)::bigint,
                                    nullif(term_end_ns, 0),
                                    CASE WHEN state = 'recalling'
                                         THEN nullif(notice_end_ns, 0) END)
                    END) AS e
    FROM contracts WHERE delivered_ns > 0
), r AS (
    SELECT u.node_id, u.epoch, u.seq, u.contract_id, u.side, u.page_seconds,
           k.pages, u.received_at,
           greatest(0, least(u.period_end_ns, k.e)
                       - greatest(u.period_start_ns, k.d)) AS dns
    FROM usage_reports u JOIN k ON k.id = u.contract_id
), c AS (
    SELECT r.*,
           least(sum(page_seconds) OVER w,
                 floor(pages::numeric * sum(dns) OVER w / 1000000000)) AS b,
           sum(page_seconds) OVER w AS rep, sum(dns) OVER w AS del
    FROM r
    WINDOW w AS (PARTITION BY contract_id, side
                 ORDER BY received_at, node_id, epoch, seq)
)
SELECT node_id, epoch, seq, contract_id, side, pages, page_seconds, dns, b,
       (b - coalesce(lag(b) OVER (PARTITION BY contract_id, side
                                  ORDER BY received_at, node_id, epoch, seq),
                     0))::bigint AS billable
FROM c;

UPDATE usage_reports u SET delivered_ns = x.dns, billable_ps = x.billable
  FROM usage_recount x
 WHERE (u.node_id, u.epoch, u.seq) = (x.node_id, x.epoch, x.seq);

INSERT INTO usage_totals (contract_id, side, pages, reported_ps, delivered_ns, billable_ps)
    SELECT contract_id, side, max(pages), sum(page_seconds), sum(dns), max(b)
    FROM usage_recount GROUP BY contract_id, side;

INSERT INTO billing_dirty (contract_id)
    SELECT DISTINCT contract_id FROM usage_recount WHERE billable <> page_seconds
    ON CONFLICT DO NOTHING;

-- Whatever writes usage_reports from now on says what each report bills.
ALTER TABLE usage_reports ALTER COLUMN delivered_ns DROP DEFAULT,
                          ALTER COLUMN billable_ps DROP DEFAULT;

-- 2. Only nodes belong to a team. A team's traders act for its accounts, so
-- an operator account with a team_id let that team's trader end the
-- operator's contracts. ramexd never made one on purpose: the team of an
-- operator or exchange account meant nothing else, so it is cleared, and
-- so is the team of every token but a trader's, which nothing read.
UPDATE accounts SET team_id = NULL WHERE kind <> 'node' AND team_id IS NOT NULL;
ALTER TABLE accounts ADD CONSTRAINT accounts_team_is_a_nodes
    CHECK (kind = 'node' OR team_id IS NULL);
UPDATE api_tokens SET team_id = NULL WHERE role <> 'trader' AND team_id IS NOT NULL;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_team_is_a_traders
    CHECK (role = 'trader' OR team_id IS NULL);
