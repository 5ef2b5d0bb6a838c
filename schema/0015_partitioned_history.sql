-- History partitioned by month (native declarative partitioning): trades by
-- ts_ns, usage reports by period_start_ns, ledger postings by (year, month).
-- These are the tables that grow without end; a month of each is its own
-- table, so an old month can be detached and archived whole, vacuum and
-- index maintenance touch the months that change, and a report of one month
-- (candles, the billing job's reads of a contract's period, a month's
-- postings) reads that month's partition only.
--
-- Each table keeps its columns, CHECKs, defaults, indexes and triggers; what
-- changes:
--
-- * A primary key must hold the partition key, so:
--     trades         (id)                  -> (id, ts_ns)
--     usage_reports  (node_id, epoch, seq) -> (node_id, epoch, seq, period_start_ns)
--     postings       (id)                  -> (id, year, month)
--   Unique across months are still: a trade id, since the writer
--   (exchange/writer.c) is the only writer of trades and takes each id from
--   its one counter (0007, 0010 say the same of the keys they dropped); a
--   posting id, from postings_id_seq; a usage report's number (node, epoch,
--   seq), which POST /v1/usage (exchange/usage_db.c) checks against the
--   stored reports with the node's account row locked (FOR NO KEY UPDATE),
--   so two batches of one node never pass the check together.
-- * No foreign key points at these tables (0007, 0008, 0010 dropped the
--   last), and they have none of their own (0006, 0007, 0008), so nothing
--   else changes.
-- * The ids ramexd reads at start (`max(id)` of trades, writer.c) are read
--   from every partition's primary key index, newest first.
--
-- Months are made ahead by ramex_history_ahead(): by this migration, by
-- ramexd at every start (exchange/ramexd.c) and once a day by its contract
-- timer (exchange/contracts.c), each time the current month and the three
-- after it. A row of a month that has no partition (a clock far off, a
-- period in 1970) lands in the default partition of its table, and moves to
-- its month when that month's partition is made (ramex_history_month). So
-- the order path never waits for a partition to be made and never fails for
-- lack of one; it only routes each new row to its month.

-- Makes month (y, m) of the three tables, when it is not there yet: a table
-- of its own, the month's rows moved into it from the default partition,
-- then attached (ATTACH takes the parent's SHARE UPDATE EXCLUSIVE lock, which
-- the inserts of the order path and the billing job do not wait for; CREATE
-- TABLE ... PARTITION OF would lock them out). Returns how many it made.
CREATE FUNCTION ramex_history_month(y int, m int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    lo    timestamp;
    hi    timestamp;
    lo_ns bigint;
    hi_ns bigint;
    ny    int;
    nm    int;
    part  text;
    made  int := 0;
    moving boolean;
    t     record;
BEGIN
    IF m NOT BETWEEN 1 AND 12 OR y NOT BETWEEN 1971 AND 9999 THEN
        RAISE EXCEPTION 'ramex_history_month(%, %): no such month', y, m;
    END IF;
    lo := make_timestamp(y, m, 1, 0, 0, 0);
    hi := lo + interval '1 month';
    lo_ns := extract(epoch FROM lo AT TIME ZONE 'UTC')::bigint * 1000000000;
    hi_ns := extract(epoch FROM hi AT TIME ZONE 'UTC')::bigint * 1000000000;
    ny := extract(year FROM hi);
    nm := extract(month FROM hi);
    FOR t IN SELECT * FROM (VALUES
        ('trades', format('ts_ns >= %s AND ts_ns < %s', lo_ns, hi_ns),
                   format('FROM (%s) TO (%s)', lo_ns, hi_ns)),
        ('usage_reports', format('period_start_ns >= %s AND period_start_ns < %s', lo_ns, hi_ns),
                   format('FROM (%s) TO (%s)', lo_ns, hi_ns)),
        ('postings', format('(year, month) >= (%s, %s) AND (year, month) < (%s, %s)', y, m, ny, nm),
                   format('FROM (%s, %s) TO (%s, %s)', y, m, ny, nm))
    ) AS v (tbl, cond, bounds) LOOP
        part := format('%s_y%sm%s', t.tbl, y, lpad(m::text, 2, '0'));
        CONTINUE WHEN to_regclass(part) IS NOT NULL;
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                       part, t.tbl);
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE %s)', t.tbl || '_default', t.cond)
            INTO moving;
        IF moving THEN
            -- a move, not a change: the ledger's append-only trigger is off
            -- for it alone, in this transaction
            IF t.tbl = 'postings' THEN
                ALTER TABLE postings_default DISABLE TRIGGER postings_append_only;
            END IF;
            EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %s RETURNING *) '
                           'INSERT INTO %I SELECT * FROM moved',
                           t.tbl || '_default', t.cond, part);
            IF t.tbl = 'postings' THEN
                ALTER TABLE postings_default ENABLE TRIGGER postings_append_only;
            END IF;
        END IF;
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES %s', t.tbl, part, t.bounds);
        made := made + 1;
    END LOOP;
    RETURN made;
END $$;

-- The current month (UTC) and `months` after it. Returns how many
-- partitions it made (0 when they were all there: a few catalog lookups).
CREATE FUNCTION ramex_history_ahead(months int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    d    timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
    made int := 0;
BEGIN
    IF months NOT BETWEEN 0 AND 120 THEN
        RAISE EXCEPTION 'ramex_history_ahead(%): months must be 0..120', months;
    END IF;
    FOR i IN 0 .. months LOOP
        made := made + ramex_history_month(extract(year FROM d + make_interval(months => i))::int,
                                           extract(month FROM d + make_interval(months => i))::int);
    END LOOP;
    RETURN made;
END $$;

-- --- the migration of the rows there are ------------------------------------

-- The old tables step aside with their rows; their indexes and keys go (the
-- copy reads them whole), so that the new tables can have their names.
ALTER TABLE trades RENAME TO trades_unpartitioned;
ALTER TABLE trades_unpartitioned DROP CONSTRAINT trades_pkey;
DROP INDEX trades_market, trades_taker;

ALTER TABLE usage_reports RENAME TO usage_reports_unpartitioned;
ALTER TABLE usage_reports_unpartitioned DROP CONSTRAINT usage_reports_pkey;
DROP INDEX usage_reports_contract, usage_reports_received;
DROP TRIGGER usage_reports_dirty ON usage_reports_unpartitioned;

ALTER TABLE postings RENAME TO postings_unpartitioned;
ALTER TABLE postings_unpartitioned DROP CONSTRAINT postings_pkey;
DROP INDEX postings_invoice, postings_movement, postings_month;
DROP TRIGGER postings_append_only ON postings_unpartitioned;
DROP TRIGGER postings_no_truncate ON postings_unpartitioned;
DROP TRIGGER postings_on_draft ON postings_unpartitioned;

-- The same columns in the same order, CHECKs and defaults (postings.id keeps
-- drawing from postings_id_seq).
CREATE TABLE trades (LIKE trades_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (ts_ns);
CREATE TABLE trades_default PARTITION OF trades DEFAULT;
CREATE TABLE usage_reports (LIKE usage_reports_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (period_start_ns);
CREATE TABLE usage_reports_default PARTITION OF usage_reports DEFAULT;
CREATE TABLE postings (LIKE postings_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (year, month);
CREATE TABLE postings_default PARTITION OF postings DEFAULT;
ALTER SEQUENCE postings_id_seq OWNED BY postings.id;

-- A month for every month the rows have, back three years (older rows, and
-- rows from a clock that was far off, stay in the default partitions, where
-- they are kept and read as before), and the months ahead.
CREATE TEMPORARY TABLE history_months ON COMMIT DROP AS
    SELECT DISTINCT extract(year FROM d)::int AS y, extract(month FROM d)::int AS m
    FROM (SELECT date_trunc('month', to_timestamp(ts_ns / 1000000000) AT TIME ZONE 'UTC') AS d
            FROM (SELECT DISTINCT ts_ns / 86400000000000 * 86400000000000 AS ts_ns
                    FROM trades_unpartitioned) s
          UNION
          SELECT date_trunc('month', to_timestamp(period_start_ns / 1000000000) AT TIME ZONE 'UTC')
            FROM (SELECT DISTINCT period_start_ns / 86400000000000 * 86400000000000 AS period_start_ns
                    FROM usage_reports_unpartitioned) s
          UNION
          SELECT make_timestamp(year, month, 1, 0, 0, 0)
            FROM (SELECT DISTINCT year, month FROM postings_unpartitioned) s
            WHERE year BETWEEN 1971 AND 9999) months
    WHERE d >= date_trunc('month', now() AT TIME ZONE 'UTC') - interval '3 years'
      AND d < date_trunc('month', now() AT TIME ZONE 'UTC') + interval '4 months';
SELECT ramex_history_month(y, m) FROM history_months ORDER BY y, m;
SELECT ramex_history_ahead(3);

-- Every row, to its month.
INSERT INTO trades SELECT * FROM trades_unpartitioned;
INSERT INTO usage_reports SELECT * FROM usage_reports_unpartitioned;
INSERT INTO postings SELECT * FROM postings_unpartitioned;
DROP TABLE trades_unpartitioned, usage_reports_unpartitioned, postings_unpartitioned;

-- The keys and indexes, on every partition (built after the copy: faster).
ALTER TABLE trades ADD PRIMARY KEY (id, ts_ns);
CREATE INDEX trades_market ON trades (market_id, id DESC);
CREATE INDEX trades_taker ON trades (taker_order_id, id);

ALTER TABLE usage_reports ADD PRIMARY KEY (node_id, epoch, seq, period_start_ns);
CREATE INDEX usage_reports_contract ON usage_reports (contract_id, side, period_start_ns);
CREATE INDEX usage_reports_received ON usage_reports (received_at);

ALTER TABLE postings ADD PRIMARY KEY (id, year, month);
CREATE INDEX postings_invoice ON postings (invoice_id, id);
CREATE INDEX postings_movement ON postings (movement_id);
CREATE INDEX postings_month ON postings (year, month, account_id);

-- The triggers, as 0005 and 0008 made them (a row trigger is cloned to
-- every partition, present and future; a statement trigger with a
-- transition table sees the rows of every partition).
CREATE TRIGGER usage_reports_dirty AFTER INSERT ON usage_reports
    REFERENCING NEW TABLE AS new_reports
    FOR EACH STATEMENT EXECUTE FUNCTION billing_mark_reports();
CREATE TRIGGER postings_append_only BEFORE UPDATE OR DELETE ON postings
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER postings_no_truncate BEFORE TRUNCATE ON postings
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER postings_on_draft AFTER INSERT ON postings
    REFERENCING NEW TABLE AS new_postings
    FOR EACH STATEMENT EXECUTE FUNCTION postings_on_draft();

ANALYZE trades, usage_reports, postings;
