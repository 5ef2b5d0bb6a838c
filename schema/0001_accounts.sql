-- Teams and accounts: who trades, who pays, who is paid.
-- An account's kind decides how its fills are delivered (brief, "Products"):
-- an operator's bid buys offline pages, a node's bid borrows lent pages.
CREATE TABLE teams (
    id         bigserial PRIMARY KEY,
    name       text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE accounts (
    id         bigserial PRIMARY KEY,
    name       text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    kind       text NOT NULL CHECK (kind IN ('node', 'operator', 'exchange')),
    team_id    bigint REFERENCES teams (id),
    created_at timestamptz NOT NULL DEFAULT now()
);
