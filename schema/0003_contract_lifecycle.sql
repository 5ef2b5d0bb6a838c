-- The rest of a contract's state machine (exchange/core/contract.h): the
-- product's terms copied from its market at the trade, and the instants of
-- each move in nanoseconds since the epoch, exactly as contract_apply sees
-- them (timestamptz keeps microseconds only). The timestamptz columns of
-- 0002 stay for people reading the table.
ALTER TABLE contracts
    ADD COLUMN product          text   NOT NULL DEFAULT 'spot' CHECK (product IN ('spot', 'perm')),
    ADD COLUMN perm_year        int    NOT NULL DEFAULT 0,
    ADD COLUMN breach_penalty   bigint NOT NULL DEFAULT 0 CHECK (breach_penalty >= 0),
    ADD COLUMN recall_notice_ns bigint NOT NULL DEFAULT 0 CHECK (recall_notice_ns >= 0),
    ADD COLUMN created_ns       bigint NOT NULL DEFAULT 0,
    ADD COLUMN deliver_by_ns    bigint NOT NULL DEFAULT 0,
    ADD COLUMN term_end_ns      bigint NOT NULL DEFAULT 0, -- 0: no term (spot)
    ADD COLUMN delivered_ns     bigint NOT NULL DEFAULT 0, -- 0: not yet
    ADD COLUMN notice_end_ns    bigint NOT NULL DEFAULT 0, -- 0: not recalling
    ADD COLUMN ended_ns         bigint NOT NULL DEFAULT 0, -- 0: running
    ADD COLUMN changed_ns       bigint NOT NULL DEFAULT 0;

-- Contracts a timer must look at: not yet final.
CREATE INDEX contracts_live ON contracts (id)
    WHERE state IN ('pending_delivery', 'active', 'recalling');

-- Every move of every contract: who, when, why. Append-only; the contract
-- row holds the state after the last one.
CREATE TABLE contract_transitions (
    id            bigserial PRIMARY KEY,
    contract_id   bigint NOT NULL REFERENCES contracts (id),
    from_state    text NOT NULL,
    to_state      text NOT NULL,
    event         text NOT NULL,
    actor         text NOT NULL CHECK (actor IN ('seller', 'buyer', 'exchange', 'admin')),
    actor_account bigint,
    at_ns         bigint NOT NULL,
    why           text NOT NULL,
    principal     text, -- tok:ID or node:KEY when a person or agent asked
    recorded_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX contract_transitions_contract ON contract_transitions (contract_id, id);
