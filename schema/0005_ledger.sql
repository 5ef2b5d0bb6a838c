-- The ledger: per-contract billing state, movements of money and their
-- double-entry postings, monthly invoices and the per-account cents carry
-- (exchange/core/invoice.h, exchange/billing.c, docs/money.md).
--
-- Money is bigint nanodollars; a posting is > 0 for a debit (the account
-- owes it), < 0 for a credit. Postings and movements are append-only: a
-- correction is a new movement. An invoice changes only while it is a
-- draft; the billing job makes it final after its month and the grace
-- period, and from then on it is immutable. Rows carry (year, month) so
-- that these tables can be partitioned by month when they grow (brief,
-- "When one machine is not enough"); plain tables are enough until then.

-- A contract's billing state (struct invoice_contract): the carries and
-- what it has billed over all months. fee_bps is fixed at the contract's
-- first billing, so a later change of the setting never re-prices it.
CREATE TABLE billing_contracts (
    contract_id    bigint PRIMARY KEY REFERENCES contracts (id),
    fee_bps        int    NOT NULL CHECK (fee_bps BETWEEN 0 AND 10000),
    amount_carry   bigint NOT NULL DEFAULT 0 CHECK (amount_carry >= 0 AND amount_carry < 31536000),
    fee_carry      bigint NOT NULL DEFAULT 0 CHECK (fee_carry >= 0 AND fee_carry < 10000),
    billed_ps      bigint NOT NULL DEFAULT 0,
    billed         bigint NOT NULL DEFAULT 0, -- the buyer's debits, n$
    fees           bigint NOT NULL DEFAULT 0, -- the exchange's part, n$
    settled        boolean NOT NULL DEFAULT false,
    settle_price   bigint,  -- perm: the price it settled at
    spot_reference bigint,  -- perm breach: the spot reference it used
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- What has been billed for each month of usage of a contract (usage plus
-- adjustments and corrections), and for lend contracts what each side
-- reported and how they were reconciled (usage_reconcile).
CREATE TABLE billing_months (
    contract_id bigint NOT NULL REFERENCES contracts (id),
    year        int    NOT NULL,
    month       int    NOT NULL CHECK (month BETWEEN 1 AND 12),
    billed_ps   bigint NOT NULL,
    seller_ps   bigint, -- NULL: that side did not report
    buyer_ps    bigint,
    recon       text   NOT NULL CHECK (recon IN ('agree', 'differ', 'one_sided', 'none', 'seller_only')),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (contract_id, year, month)
);
CREATE INDEX billing_months_flagged ON billing_months (year, month)
    WHERE recon IN ('differ', 'one_sided');

-- Contracts with something new to bill: a usage report arrived, or a perm
-- contract ended or breached. The billing job takes rows out in the same
-- transaction that bills the contract, so a failed run leaves them here.
CREATE TABLE billing_dirty (
    contract_id bigint PRIMARY KEY
);

CREATE FUNCTION billing_mark_reports() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO billing_dirty (contract_id)
        SELECT DISTINCT contract_id FROM new_reports
        ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER usage_reports_dirty AFTER INSERT ON usage_reports
    REFERENCING NEW TABLE AS new_reports
    FOR EACH STATEMENT EXECUTE FUNCTION billing_mark_reports();

CREATE FUNCTION billing_mark_contract() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IN ('ended', 'breached') AND NEW.delivered_ns > 0 THEN
        INSERT INTO billing_dirty (contract_id) VALUES (NEW.id)
            ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER contracts_dirty AFTER INSERT OR UPDATE OF state ON contracts
    FOR EACH ROW EXECUTE FUNCTION billing_mark_contract();

-- Reports and ended contracts from before this migration.
INSERT INTO billing_dirty (contract_id)
    SELECT DISTINCT contract_id FROM usage_reports
    UNION SELECT id FROM contracts WHERE state IN ('ended', 'breached') AND delivered_ns > 0;

-- The invoice of one account for one calendar month (struct invoice).
-- total is the sum of its postings, exact; payable_cents and the cents
-- carries are set when it becomes final.
CREATE TABLE invoices (
    id            bigserial PRIMARY KEY,
    account_id    bigint NOT NULL REFERENCES accounts (id),
    year          int    NOT NULL,
    month         int    NOT NULL CHECK (month BETWEEN 1 AND 12),
    status        text   NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'final')),
    total         bigint NOT NULL DEFAULT 0,
    lines         bigint NOT NULL DEFAULT 0,
    payable_cents bigint,
    cents_in      bigint, -- the account's sub-cent carry before ...
    cents_out     bigint, -- ... and after this invoice (n$, 0..9999999)
    created_at    timestamptz NOT NULL DEFAULT now(),
    finalized_at  timestamptz,
    UNIQUE (account_id, year, month),
    CHECK ((status = 'final') = (payable_cents IS NOT NULL))
);
CREATE INDEX invoices_month ON invoices (year, month, status);

CREATE FUNCTION invoices_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'invoice % cannot be deleted; post a correction', OLD.id;
    END IF;
    IF OLD.status = 'final' THEN
        RAISE EXCEPTION 'invoice % is final and cannot change; post into the next open invoice', OLD.id;
    END IF;
    IF NEW.account_id <> OLD.account_id OR NEW.year <> OLD.year OR NEW.month <> OLD.month THEN
        RAISE EXCEPTION 'invoice % cannot move to another account or month', OLD.id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER invoices_immutable BEFORE UPDATE OR DELETE ON invoices
    FOR EACH ROW EXECUTE FUNCTION invoices_immutable();

-- One movement of money (struct invoice_movement): what it charges for
-- and the invoice month it lands in. usage_year/usage_month: the month of
-- usage it bills (NULL for a settlement).
CREATE TABLE movements (
    id             bigserial PRIMARY KEY,
    contract_id    bigint NOT NULL REFERENCES contracts (id),
    kind           text   NOT NULL CHECK (kind IN ('usage', 'adjustment', 'settlement', 'correction')),
    year           int    NOT NULL,
    month          int    NOT NULL CHECK (month BETWEEN 1 AND 12),
    usage_year     int,
    usage_month    int,
    charge_start_ns bigint NOT NULL,
    charge_end_ns  bigint NOT NULL,
    page_seconds   bigint NOT NULL,
    unit_price     bigint NOT NULL,
    amount         bigint NOT NULL, -- the buyer's debit
    fee            bigint NOT NULL, -- the exchange's part of it
    recon          text,            -- lend: how the month reconciled
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX movements_contract ON movements (contract_id, id);
CREATE INDEX movements_month ON movements (year, month);

-- The postings of a movement; they sum to zero. account_id and contract_id
-- repeat the invoice's account and the movement's contract for the
-- queries; the trigger below holds them to those (foreign keys of their
-- own would only check the same thing again, row by row, on the billing
-- job's bulk inserts).
CREATE TABLE postings (
    id          bigserial PRIMARY KEY,
    movement_id bigint NOT NULL REFERENCES movements (id),
    invoice_id  bigint NOT NULL REFERENCES invoices (id),
    account_id  bigint NOT NULL,
    contract_id bigint NOT NULL,
    year        int    NOT NULL,
    month       int    NOT NULL CHECK (month BETWEEN 1 AND 12),
    role        text   NOT NULL CHECK (role IN ('buyer', 'seller', 'exchange')),
    amount      bigint NOT NULL
);
CREATE INDEX postings_invoice ON postings (invoice_id, id);
CREATE INDEX postings_movement ON postings (movement_id);
CREATE INDEX postings_month ON postings (year, month, account_id);

CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: a correction is a new movement', TG_TABLE_NAME;
END $$;
CREATE TRIGGER movements_append_only BEFORE UPDATE OR DELETE ON movements
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER postings_append_only BEFORE UPDATE OR DELETE ON postings
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER movements_no_truncate BEFORE TRUNCATE ON movements
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER postings_no_truncate BEFORE TRUNCATE ON postings
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();

-- A posting lands only on a draft invoice of its own account and month
-- (checked once per statement, since the billing job inserts in bulk).
CREATE FUNCTION postings_on_draft() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad record;
    n bigint;
BEGIN
    -- EXECUTE plans it afresh each time: a plan cached for the session,
    -- made when the tables were small, would scan them whole as they grow.
    EXECUTE 'SELECT p.invoice_id, i.status, p.account_id, p.year, p.month
        FROM new_postings p JOIN invoices i ON i.id = p.invoice_id
        JOIN movements m ON m.id = p.movement_id
        WHERE i.status <> ''draft'' OR i.account_id <> p.account_id
           OR i.year <> p.year OR i.month <> p.month
           OR m.contract_id <> p.contract_id
        LIMIT 1' INTO bad;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        RAISE EXCEPTION 'a posting for account % %-% cannot go on invoice % (%): only on the draft invoice of its own account and month, for its movement''s contract',
            bad.account_id, bad.year, bad.month, bad.invoice_id, bad.status;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER postings_on_draft AFTER INSERT ON postings
    REFERENCING NEW TABLE AS new_postings
    FOR EACH STATEMENT EXECUTE FUNCTION postings_on_draft();

-- The sub-cent part of each account's invoices, carried to its next final
-- invoice (money_to_cents).
CREATE TABLE billing_cents (
    account_id bigint PRIMARY KEY REFERENCES accounts (id),
    rem        bigint NOT NULL CHECK (rem >= 0 AND rem < 10000000)
);

-- Every billing run: when, as of when, and what it did.
CREATE TABLE billing_runs (
    id          bigserial PRIMARY KEY,
    as_of_ns    bigint NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    elapsed_ms  bigint NOT NULL,
    contracts   bigint NOT NULL,
    movements   bigint NOT NULL,
    postings    bigint NOT NULL,
    settled     bigint NOT NULL,
    finalized   bigint NOT NULL,
    flagged     bigint NOT NULL,
    trigger     text   NOT NULL CHECK (trigger IN ('timer', 'api'))
);
