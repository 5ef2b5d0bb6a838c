-- Ids of orders and of trades (a contract has its trade's id, 0010) come
-- from the database in blocks, not from max(id) + 1 read at start: a
-- ramexd takes a block with one nextval (each value the first id of a
-- block of 65536 ids, APPLY_ID_BLOCK in exchange/writer_apply.h) and hands
-- its ids out without a query. Two ramexd on one database, one after the
-- other or at once, never hand out the same id, and a restart (or a
-- rebuild after a failed batch) never reuses one; ids skipped are gaps.
CREATE SEQUENCE order_id_blocks INCREMENT BY 65536 MINVALUE 1;
CREATE SEQUENCE trade_id_blocks INCREMENT BY 65536 MINVALUE 1;
-- the first block starts past every id written so far
SELECT setval('order_id_blocks',
              (SELECT coalesce(max(id), 0) + 1 FROM orders), false);
SELECT setval('trade_id_blocks',
              greatest((SELECT coalesce(max(id), 0) FROM trades),
                       (SELECT coalesce(max(id), 0) FROM contracts)) + 1,
              false);
