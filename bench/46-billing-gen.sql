-- bench/46-billing-gen.sql: the fleet of bench/46-billing.sh, made in
-- PostgreSQL itself. :nodes nodes, each the seller of four contracts
-- delivered since :t0 (ns): two spot offline and one perm-2026 offline
-- bought by the operator, and one spot lend bought by the next node; and a
-- daily usage report per contract and side for :days days (the lend
-- contract's buyer reports too). Run with psql -v nodes=N -v t0=NS -v days=D.
\set ON_ERROR_STOP on
BEGIN;
INSERT INTO teams (name) VALUES ('bench');
INSERT INTO accounts (name, kind) VALUES ('operator', 'operator');
INSERT INTO accounts (name, kind, team_id)
    SELECT 'n' || g, 'node', (SELECT id FROM teams WHERE name = 'bench')
    FROM generate_series(1, :nodes) g;
INSERT INTO markets (name, product, term_end, tick, lot, min_pages, max_pages,
                     price_min, price_max, notice_period_s, breach_penalty,
                     delivery_deadline_s)
VALUES ('spot', 'spot', NULL, 1000, 256, 256, 1073741824, 1000, 100000000, 3600, 0, 600),
       ('perm-2026', 'perm', '2027-01-01', 1000, 256, 256, 1073741824, 1000, 100000000, 0, 20000, 600);

CREATE TEMP TABLE nodes AS
    SELECT id, row_number() OVER (ORDER BY id) AS i FROM accounts WHERE kind = 'node';
CREATE TEMP TABLE gen AS
    SELECT (n.i - 1) * 4 + k + 1 AS id, n.id AS seller,
           CASE WHEN k = 3 THEN m.id ELSE (SELECT id FROM accounts WHERE kind = 'operator') END AS buyer,
           k, CASE WHEN k = 2 THEN (SELECT id FROM markets WHERE name = 'perm-2026')
                   ELSE (SELECT id FROM markets WHERE name = 'spot') END AS market,
           262144::bigint AS pages,
           (ARRAY[100000, 110000, 200000, 150000])[k + 1]::bigint AS price
    FROM nodes n CROSS JOIN generate_series(0, 3) k
    LEFT JOIN nodes m ON m.i = n.i % :nodes + 1;

INSERT INTO orders (id, market_id, account_id, side, tif, stp, post_only, price, pages,
                    remaining, filled, status, priority, created_ns, updated_ns, placed_by)
    SELECT 2 * id - s, market, CASE WHEN s = 1 THEN buyer ELSE seller END,
           CASE WHEN s = 1 THEN 'buy' ELSE 'sell' END, 'gtc', 'cancel_taker', false,
           price, pages, 0, pages, 'filled', 2 * id - s, :t0 - 3600000000000,
           :t0 - 3600000000000, 'bench'
    FROM gen CROSS JOIN generate_series(0, 1) s;
INSERT INTO trades (id, market_id, seq, taker_order_id, maker_order_id, buyer_id,
                    seller_id, taker_side, price, pages, ts_ns)
    SELECT id, market, id, 2 * id - 1, 2 * id, buyer, seller, 'buy', price, pages,
           :t0 - 3600000000000 FROM gen;
INSERT INTO contracts (id, trade_id, market_id, buyer_id, seller_id, delivery, pages,
                       price, state, deliver_by, term_end, notice_period_s, created_at,
                       updated_at, product, perm_year, breach_penalty, created_ns,
                       deliver_by_ns, term_end_ns, delivered_ns, changed_ns)
    SELECT id, id, market, buyer, seller, CASE WHEN k = 3 THEN 'lend' ELSE 'offline' END,
           pages, price, 'active', to_timestamp(:t0 / 1000000000),
           CASE WHEN k = 2 THEN timestamptz '2027-01-01' END, 3600,
           to_timestamp(:t0 / 1000000000 - 3600), to_timestamp(:t0 / 1000000000),
           CASE WHEN k = 2 THEN 'perm' ELSE 'spot' END, CASE WHEN k = 2 THEN 2026 ELSE 0 END,
           CASE WHEN k = 2 THEN 20000 ELSE 0 END, :t0 - 3600000000000, :t0,
           CASE WHEN k = 2 THEN 1798761600000000000 ELSE 0 END, :t0, :t0
    FROM gen;

-- Daily reports: the seller of every contract, and the buyer of the lend
-- one, a little short of full delivery so that amounts carry.
INSERT INTO usage_reports (node_id, epoch, seq, contract_id, side, period_start_ns,
                           period_end_ns, page_seconds, kmod_page_seconds, kmod_pages,
                           body_hash, delivered_ns, billable_ps)
    SELECT seller, 1, k * :days + d + 1, id, 'seller',
           :t0 + d * 86400000000000, :t0 + (d + 1) * 86400000000000,
           pages * 86400 - (id % 97), pages * 86400 * (d + 1), pages, id * 1000 + d,
           86400000000000, pages * 86400 - (id % 97)
    FROM gen CROSS JOIN generate_series(0, :days - 1) d;
INSERT INTO usage_reports (node_id, epoch, seq, contract_id, side, period_start_ns,
                           period_end_ns, page_seconds, kmod_page_seconds, kmod_pages,
                           body_hash, delivered_ns, billable_ps)
    SELECT buyer, 1, 1000 + d + 1, id, 'buyer',
           :t0 + d * 86400000000000, :t0 + (d + 1) * 86400000000000,
           pages * 86400 - (id % 89), pages * 86400 * (d + 1), pages, -(id * 1000 + d),
           86400000000000, pages * 86400 - (id % 89)
    FROM gen CROSS JOIN generate_series(0, :days - 1) d WHERE k = 3;
COMMIT;
ANALYZE;
