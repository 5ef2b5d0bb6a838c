-- The contract timer (exchange/contracts.c) asks each tick which contracts
-- have a deadline that has passed: delivery for a pending one, the end of
-- the notice for a recalling one, the end of the term for an active
-- permanent one. contracts_live indexed the ids of the live contracts only,
-- so every tick read every live contract and its deadline columns: 66 ms a
-- tick with 100 000 contracts waiting for delivery (bench/20-ramexd.sh),
-- and a fleet's live contracts are that many and more. This index holds
-- each live contract's next deadline, so a tick reads only the contracts
-- that are due. It replaces contracts_live, which nothing else used: an
-- insert on the order path still updates one partial index, not two.
--
-- The expression and the predicate must stay exactly as the timer's query
-- spells them (CONTRACTS_DUE_SQL in exchange/contracts.h), or PostgreSQL will not
-- see that the index serves it; a test checks the plan.
CREATE INDEX contracts_due ON contracts (
    (CASE state WHEN 'pending_delivery' THEN deliver_by_ns
                WHEN 'recalling' THEN notice_end_ns
                ELSE term_end_ns END), id)
    WHERE state IN ('pending_delivery', 'recalling')
       OR (state = 'active' AND term_end_ns > 0);

DROP INDEX contracts_live;
