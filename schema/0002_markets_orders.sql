-- Markets, orders, trades and contracts: what the writer thread persists in
-- one transaction per batch of commands (group commit).
--
-- Ids of orders, trades and contracts are assigned by the writer (it owns
-- the books and must know an id before the book sees the command), so they
-- are plain bigints, not serials.
CREATE TABLE markets (
    id                  bigserial PRIMARY KEY,
    name                text NOT NULL UNIQUE CHECK (name = 'spot' OR name ~ '^perm-[0-9]{4}$'),
    product             text NOT NULL CHECK (product IN ('spot', 'perm')),
    term_end            timestamptz, -- perm: the end of calendar year YYYY
    tick                bigint NOT NULL CHECK (tick > 0),
    lot                 bigint NOT NULL CHECK (lot > 0),
    min_pages           bigint NOT NULL,
    max_pages           bigint NOT NULL,
    price_min           bigint NOT NULL,
    price_max           bigint NOT NULL,
    notice_period_s     bigint NOT NULL CHECK (notice_period_s >= 0),
    breach_penalty      bigint NOT NULL CHECK (breach_penalty >= 0), -- nanodollars per page-year
    delivery_deadline_s bigint NOT NULL CHECK (delivery_deadline_s > 0),
    seq                 bigint NOT NULL DEFAULT 0, -- the book's last event
    created_at          timestamptz NOT NULL DEFAULT now(),
    CHECK ((product = 'perm') = (term_end IS NOT NULL))
);

-- Every order the book accepted. `priority` is the book sequence number of
-- its acceptance: open orders are re-inserted in (price, priority) order when
-- a book is rebuilt. Times are nanoseconds since the epoch, as the book sees
-- them.
CREATE TABLE orders (
    id              bigint PRIMARY KEY,
    market_id       bigint NOT NULL REFERENCES markets (id),
    account_id      bigint NOT NULL REFERENCES accounts (id),
    side            text NOT NULL CHECK (side IN ('buy', 'sell')),
    tif             text NOT NULL CHECK (tif IN ('gtc', 'ioc', 'fok', 'gtd')),
    stp             text NOT NULL,
    post_only       boolean NOT NULL,
    price           bigint NOT NULL,
    pages           bigint NOT NULL CHECK (pages > 0),
    remaining       bigint NOT NULL CHECK (remaining >= 0),
    filled          bigint NOT NULL DEFAULT 0,
    expires_ns      bigint,
    client_order_id text,
    status          text NOT NULL CHECK (status IN ('open', 'filled', 'cancelled', 'expired')),
    reason          text,
    priority        bigint NOT NULL,
    created_ns      bigint NOT NULL,
    updated_ns      bigint NOT NULL,
    placed_by       text NOT NULL -- the principal: tok:ID or node:KEY
);
CREATE UNIQUE INDEX orders_client_id ON orders (account_id, client_order_id)
    WHERE client_order_id IS NOT NULL;
CREATE INDEX orders_open ON orders (market_id, side, price, priority) WHERE status = 'open';
CREATE INDEX orders_account ON orders (account_id, id DESC);

CREATE TABLE trades (
    id             bigint PRIMARY KEY,
    market_id      bigint NOT NULL REFERENCES markets (id),
    seq            bigint NOT NULL, -- the book's event sequence
    taker_order_id bigint NOT NULL REFERENCES orders (id),
    maker_order_id bigint NOT NULL REFERENCES orders (id),
    buyer_id       bigint NOT NULL REFERENCES accounts (id),
    seller_id      bigint NOT NULL REFERENCES accounts (id),
    taker_side     text NOT NULL CHECK (taker_side IN ('buy', 'sell')),
    price          bigint NOT NULL,
    pages          bigint NOT NULL CHECK (pages > 0),
    ts_ns          bigint NOT NULL
);
CREATE INDEX trades_market ON trades (market_id, id DESC);

-- A trade is a contract from the moment it happens. The billing engine adds
-- its own migrations (transitions, usage, ledger) after this one; here a
-- contract is only born, pending delivery, with its deadline.
CREATE TABLE contracts (
    id           bigint PRIMARY KEY,
    trade_id     bigint NOT NULL UNIQUE REFERENCES trades (id),
    market_id    bigint NOT NULL REFERENCES markets (id),
    buyer_id     bigint NOT NULL REFERENCES accounts (id),
    seller_id    bigint NOT NULL REFERENCES accounts (id),
    delivery     text NOT NULL CHECK (delivery IN ('offline', 'lend')),
    pages        bigint NOT NULL CHECK (pages > 0),
    price        bigint NOT NULL,
    state        text NOT NULL CHECK (state IN ('pending_delivery', 'active', 'recalling', 'ended', 'breached')),
    deliver_by   timestamptz NOT NULL,
    term_end     timestamptz, -- perm: end of the year; spot: open-ended
    notice_period_s bigint NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE INDEX contracts_buyer ON contracts (buyer_id, id DESC);
CREATE INDEX contracts_seller ON contracts (seller_id, id DESC);

-- Idempotency: the first answer to every keyed command. A retry with the
-- same key and the same body gets this answer again and changes nothing;
-- the same key with another body is refused. Written in the same
-- transaction as the command's effects, so an answer exists iff they do.
CREATE TABLE idempotency (
    scope       text NOT NULL, -- whose key: tok:ID, node:KEY or acct:ID (client order ids)
    key         text NOT NULL CHECK (length(key) BETWEEN 1 AND 128),
    request_sha text NOT NULL,
    status      int NOT NULL,
    response    text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);
