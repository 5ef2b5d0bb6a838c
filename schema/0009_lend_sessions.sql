-- The data path of a lend contract (docs/lending.md): where the lender's
-- page server listens and the per-contract secret both sides authenticate
-- with (HMAC-SHA256 in the lend protocol). The seller's agent registers the
-- endpoint (POST /v1/contracts/{id}/lend), the exchange draws the secret
-- once, and both parties read the pair back (GET). One row per contract; a
-- repeated registration moves the endpoint and keeps the secret, so a
-- lender restarted on another port stays reachable without re-keying.
-- No foreign key to contracts (0007: the writer is the contracts' only
-- writer); the handler checks the contract under its own query.
CREATE TABLE lend_sessions (
    contract_id bigint PRIMARY KEY,
    endpoint    text NOT NULL CHECK (length(endpoint) BETWEEN 3 AND 255),
    secret      text NOT NULL CHECK (secret ~ '^[0-9a-f]{64}$'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
