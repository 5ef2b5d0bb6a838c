-- The order path's foreign keys. Each one costs PostgreSQL a lookup and a
-- row lock (FOR KEY SHARE) of the referenced row per inserted row: eleven
-- per traded pair of orders, about a third of what PostgreSQL spends on a
-- batch (bench/20-ramexd.sh; docs/ARCHITECTURE.md has the figures).
--
-- They check nothing that is not checked already: the writer thread
-- (exchange/writer.c) is the only writer of orders, trades and contracts.
-- It takes every market id and account id from its own cache, which it
-- loads from these tables and refreshes from them (an account it does not
-- know is looked up before its order is applied); it takes every order id
-- from its own books and every trade id from the trade it has just made,
-- in the same transaction. Accounts and markets are never deleted, and no
-- order, trade or contract is ever deleted either, so a reference that was
-- valid when written stays valid. Anything else that writes these tables
-- must check its references the same way (as 0006 says for usage_reports).
--
-- Every CHECK constraint, primary key and unique index stays, and so does
-- every secondary index, since each serves a query:
--   orders_client_id  client order ids are unique per account (a constraint)
--   orders_open       the rebuild of the books (open orders in priority order)
--   orders_account    GET /v1/orders (an account's orders, newest first)
--   trades_market     recent trades and price history of a market
--   contracts_buyer, contracts_seller, contracts_live   contract lists, timer
-- The keys that point at contracts (contract_transitions, usage, ledger)
-- stay: they are written by other modules, off the order path.
ALTER TABLE orders DROP CONSTRAINT orders_market_id_fkey;
ALTER TABLE orders DROP CONSTRAINT orders_account_id_fkey;

ALTER TABLE trades DROP CONSTRAINT trades_market_id_fkey;
ALTER TABLE trades DROP CONSTRAINT trades_taker_order_id_fkey;
ALTER TABLE trades DROP CONSTRAINT trades_maker_order_id_fkey;
ALTER TABLE trades DROP CONSTRAINT trades_buyer_id_fkey;
ALTER TABLE trades DROP CONSTRAINT trades_seller_id_fkey;

ALTER TABLE contracts DROP CONSTRAINT contracts_trade_id_fkey;
ALTER TABLE contracts DROP CONSTRAINT contracts_market_id_fkey;
ALTER TABLE contracts DROP CONSTRAINT contracts_buyer_id_fkey;
ALTER TABLE contracts DROP CONSTRAINT contracts_seller_id_fkey;

-- What a retry of an order placed with a client order id (and no
-- Idempotency-Key) is answered from, instead of an idempotency row per
-- order (the row, with the answer's text and its key, cost PostgreSQL about
-- 15 us an order): the order row, its trades as taker and their contracts
-- rebuild the first answer exactly (exchange/writer.c, coid_replay). Two
-- facts of that answer are not in the rows otherwise: the maker's pages
-- left after each trade (a later reduce changes them), and whether the
-- order was cancelled as it was placed (an IOC's rest, a FOK, a post-only,
-- self-trade prevention of the taker), which a later cancel would hide.
-- NULL in rows written before this migration, whose retries are answered
-- from their idempotency rows as before.
ALTER TABLE trades ADD COLUMN maker_remaining bigint CHECK (maker_remaining >= 0);
ALTER TABLE orders ADD COLUMN placed_reason text;
-- The trades of an order as taker, for that answer.
CREATE INDEX trades_taker ON trades (taker_order_id, id);
