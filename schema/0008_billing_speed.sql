-- What makes the billing job fast (exchange/billing.c, bench/46-billing.sh).
-- The meaning of every 0005 column is unchanged.
--
-- The foreign keys of the ledger's bulk-written tables were checked row by
-- row: one SPI query and one row lock (FOR KEY SHARE, a WAL record on the
-- row just inserted) per key and row. For a batch of 500 contracts that was
-- 2 000 checks on postings alone, about 100 of the ~250 ms a batch took in
-- PostgreSQL (EXPLAIN ANALYZE, 2 000 nodes x 4 contracts). The rows they
-- point at are never deleted (movements and postings are append-only,
-- invoices refuse DELETE, ramexd deletes no contracts), so what the keys
-- guarded was only that a new row points at an existing one. That is now
-- checked once per statement, by a join over the statement's new rows, in
-- the same triggers that already check each statement.
ALTER TABLE postings DROP CONSTRAINT postings_movement_id_fkey;
ALTER TABLE postings DROP CONSTRAINT postings_invoice_id_fkey;
ALTER TABLE movements DROP CONSTRAINT movements_contract_id_fkey;
ALTER TABLE billing_months DROP CONSTRAINT billing_months_contract_id_fkey;
ALTER TABLE billing_contracts DROP CONSTRAINT billing_contracts_contract_id_fkey;

-- A posting points at an existing movement of its own contract and lands
-- only on an existing draft invoice of its own account and month.
CREATE OR REPLACE FUNCTION postings_on_draft() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad record;
    n bigint;
BEGIN
    -- EXECUTE plans it afresh each time: a plan cached for the session,
    -- made when the tables were small, would scan them whole as they grow.
    EXECUTE 'SELECT p.invoice_id, coalesce(i.status, ''missing'') AS status,
               p.account_id, p.year, p.month, p.movement_id, m.id IS NULL AS no_movement
        FROM new_postings p LEFT JOIN invoices i ON i.id = p.invoice_id
        LEFT JOIN movements m ON m.id = p.movement_id
        WHERE i.id IS NULL OR m.id IS NULL
           OR i.status <> ''draft'' OR i.account_id <> p.account_id
           OR i.year <> p.year OR i.month <> p.month
           OR m.contract_id <> p.contract_id
        LIMIT 1' INTO bad;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 AND bad.no_movement THEN
        RAISE EXCEPTION 'a posting for account % %-% names movement %, which does not exist: insert the movement first',
            bad.account_id, bad.year, bad.month, bad.movement_id;
    END IF;
    IF n > 0 THEN
        RAISE EXCEPTION 'a posting for account % %-% cannot go on invoice % (%): only on the draft invoice of its own account and month, for its movement''s contract',
            bad.account_id, bad.year, bad.month, bad.invoice_id, bad.status;
    END IF;
    RETURN NULL;
END $$;

-- A movement and a contract's or a month's billing state are of an
-- existing contract.
CREATE FUNCTION ledger_contract_exists() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    missing bigint;
BEGIN
    EXECUTE 'SELECT n.contract_id FROM new_rows n
        WHERE NOT EXISTS (SELECT 1 FROM contracts c WHERE c.id = n.contract_id)
        LIMIT 1' INTO missing;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION '% row for contract %, which does not exist: bill only contracts in the contracts table',
            TG_TABLE_NAME, missing;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER movements_contract_exists AFTER INSERT ON movements
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_contract_exists();
CREATE TRIGGER billing_months_contract_exists AFTER INSERT ON billing_months
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_contract_exists();
CREATE TRIGGER billing_contracts_contract_exists AFTER INSERT ON billing_contracts
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_contract_exists();
