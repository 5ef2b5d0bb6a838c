-- Markets owned, not global (issue 31): each market's book is kept and
-- written by exactly one ramexd at a time. An instance owns a market while
-- its lock connection holds the session-level advisory lock
-- pg_try_advisory_lock(1381518667, market id) (exchange/owner.c); when that
-- session ends (the process killed, the machine gone, the network cut), the
-- lock goes with it and another instance may take the market.
--
-- The lock alone cannot stop the old owner's writer, whose transactions
-- run on other connections: so every take bumps the market's epoch here,
-- and every batch of the writer calls market_fence with the epochs it
-- holds, for the markets it touches, inside its own transaction. The
-- fence share-locks the rows; a take's UPDATE waits for the batches that
-- passed it and, once committed, fails every later one (RX001). So a
-- batch of a writer that lost a market can never commit after the market
-- was taken, and the taker rebuilds the book from everything the old
-- owner committed.
CREATE TABLE market_owners (
    market_id bigint PRIMARY KEY REFERENCES markets (id),
    epoch bigint NOT NULL CHECK (epoch > 0),
    -- who holds it: the instance's name, and the base URL that clients
    -- are redirected to ('' while that instance has not bound its port)
    instance text NOT NULL,
    url text NOT NULL DEFAULT '',
    since timestamptz NOT NULL DEFAULT now()
);

-- Raises RX001 unless every (id, epoch) pair is the market's current
-- epoch, and share-locks those rows until the end of the transaction.
CREATE FUNCTION market_fence(ids bigint[], epochs bigint[]) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    held int;
BEGIN
    SELECT count(*) INTO held FROM (
        SELECT 1 FROM market_owners o
        JOIN unnest(ids, epochs) AS u(id, epoch)
          ON o.market_id = u.id AND o.epoch = u.epoch
        FOR SHARE OF o) s;
    IF held <> cardinality(ids) THEN
        RAISE EXCEPTION 'market ownership lost'
            USING ERRCODE = 'RX001',
                  HINT = 'another ramexd took one of these markets';
    END IF;
    RETURN held;
END
$$;
