-- Node HMAC secrets and lend-contract secrets sealed (issue 25): a dump, a
-- backup or a read replica of this database must not be able to sign as a
-- node or speak a lend contract's protocol. ramexd seals each secret with
-- AES-256-GCM under a key of its own key file (exchange/seal.h,
-- docs/operations.md "Sealing key") into secret_sealed; the plaintext
-- column stays only for rows written before this migration, and ramexd
-- seals those (and NULLs their plaintext) at its next start: SQL cannot,
-- since the key is not in the database.
ALTER TABLE node_keys
    ALTER COLUMN secret DROP NOT NULL,
    ADD COLUMN secret_sealed text
        CHECK (secret_sealed ~ '^rxseal1:[a-z0-9_-]{1,16}:[0-9a-f]+$'),
    ADD CONSTRAINT node_keys_has_secret
        CHECK (secret IS NOT NULL OR secret_sealed IS NOT NULL),
    -- Unix seconds: the latest timestamp ahead of the exchange's clock
    -- that a ramexd took from this key, 10 s further (exchange/auth.h). A
    -- restarted ramexd refuses timestamps up to it, since the nonces the
    -- one before took are gone with it.
    ADD COLUMN signed_until bigint NOT NULL DEFAULT 0;

ALTER TABLE lend_sessions
    ALTER COLUMN secret DROP NOT NULL,
    ADD COLUMN secret_sealed text
        CHECK (secret_sealed ~ '^rxseal1:[a-z0-9_-]{1,16}:[0-9a-f]+$'),
    ADD CONSTRAINT lend_sessions_has_secret
        CHECK (secret IS NOT NULL OR secret_sealed IS NOT NULL);
