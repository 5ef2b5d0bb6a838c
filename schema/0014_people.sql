-- People and agents on one account (docs/agent.md, "People and the agent").
--
-- Who cancelled an order and why: the principal (tok:ID or node:KEY, as
-- orders.placed_by) and the note it gave, NULL for orders that left the book
-- by the market's rules (IOC rest, FOK, post-only, self-trade, expiry: the
-- reason column says which). Written by the writer thread with the order's
-- update, in the batch of the cancel.
ALTER TABLE orders ADD COLUMN cancelled_by text;
ALTER TABLE orders ADD COLUMN cancel_note text CHECK (length(cancel_note) <= 200);

-- A node's automation: a person pauses it (the agent keeps delivering and
-- metering its contracts, and stops trading) and resumes it. NULL = running.
-- The agent reads it from GET /v1/whoami and hears of a change on its event
-- stream ("automation").
ALTER TABLE accounts ADD COLUMN trading_paused_at timestamptz;
ALTER TABLE accounts ADD COLUMN trading_paused_by text;
ALTER TABLE accounts ADD COLUMN trading_pause_note text CHECK (length(trading_pause_note) <= 200);
