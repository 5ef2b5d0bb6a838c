-- Usage reports from node agents (exchange/core/usage.h, docs/money.md).
-- The number (node, epoch, seq) is the idempotency key: a retry with the
-- same body is counted once, another body under a used number is refused
-- and kept in usage_conflicts for people to look at.
CREATE TABLE usage_reports (
    node_id           bigint NOT NULL REFERENCES accounts (id),
    epoch             bigint NOT NULL CHECK (epoch >= 1),
    seq               bigint NOT NULL CHECK (seq >= 1),
    contract_id       bigint NOT NULL REFERENCES contracts (id),
    side              text NOT NULL CHECK (side IN ('seller', 'buyer')),
    period_start_ns   bigint NOT NULL,
    period_end_ns     bigint NOT NULL CHECK (period_end_ns > period_start_ns),
    page_seconds      bigint NOT NULL CHECK (page_seconds >= 0),
    kmod_page_seconds bigint NOT NULL CHECK (kmod_page_seconds >= 0),
    kmod_pages        bigint NOT NULL CHECK (kmod_pages >= 0),
    body_hash         bigint NOT NULL, -- usage_body_hash, as a signed bigint
    received_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (node_id, epoch, seq)
);
-- The billing job reads a contract's reports per side in period order.
CREATE INDEX usage_reports_contract ON usage_reports (contract_id, side, period_start_ns);
CREATE INDEX usage_reports_received ON usage_reports (received_at);

-- Numbers reused with another body: refused (409), kept as evidence.
CREATE TABLE usage_conflicts (
    id          bigserial PRIMARY KEY,
    node_id     bigint NOT NULL,
    epoch       bigint NOT NULL,
    seq         bigint NOT NULL,
    body        jsonb NOT NULL,
    principal   text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
