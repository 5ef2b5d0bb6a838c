-- What several ramexd on one database (the setting `shared = 1`) share
-- beyond the orders themselves: the nonces of signed requests, and the
-- event stream behind /v1/events (docs/ARCHITECTURE.md, "Scaling beyond
-- one ramexd"). A lone ramexd (shared = 0) leaves both tables empty.

-- Every nonce a node key signed with, until its timestamp leaves the
-- replay window (expires: the signed timestamp + 300 s, Unix seconds): an
-- instance takes a signed request only if its (key_id, nonce) row is new
-- (INSERT ... ON CONFLICT DO NOTHING), so a request replayed to another
-- instance is refused. Rows past `expires` are deleted by the instances.
CREATE TABLE auth_nonces (
    key_id  text NOT NULL,
    nonce   text NOT NULL,
    expires bigint NOT NULL,
    PRIMARY KEY (key_id, nonce)
);
CREATE INDEX auth_nonces_expires ON auth_nonces (expires);

-- The event stream: fills, order changes and contracts of the writers'
-- batches (written in the batch's own transaction), contract moves,
-- recalls and automation changes. Ids are dense and in commit order: a
-- writer takes them from event_head, whose row it holds locked until it
-- commits, so that a reader that has seen id N has seen every id below N,
-- on every instance. Each instance reads what is new when woken by the
-- NOTIFY below, and deletes what is older than its retention window.
CREATE TABLE events (
    id     bigint PRIMARY KEY,
    type   text NOT NULL,
    acct_a bigint NOT NULL,
    team_a bigint NOT NULL,
    acct_b bigint NOT NULL,
    team_b bigint NOT NULL,
    data   text NOT NULL,
    at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE event_head (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    last bigint NOT NULL CHECK (last >= 0)
);
INSERT INTO event_head VALUES (true, 0);

-- One wake-up a transaction that wrote events (NOTIFYs of one transaction
-- with the same payload are folded into one), sent as it commits.
CREATE FUNCTION events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ramex_events', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_notify();
