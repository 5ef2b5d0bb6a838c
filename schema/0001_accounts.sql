-- Teams, accounts and the credentials that may act for them.
--
-- An account's kind decides how its fills are delivered (brief, "Products"):
-- an operator's bid buys offline pages, a node's bid borrows lent pages. The
-- exchange's own account takes the other side of fees and penalties.
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
    created_at timestamptz NOT NULL DEFAULT now(),
    -- a node belongs to the team whose traders may trade for it
    CHECK (kind <> 'node' OR team_id IS NOT NULL)
);
CREATE INDEX accounts_team ON accounts (team_id);

-- Bearer tokens for people (trader, operator, finance, admin). Only the
-- SHA-256 of a token is kept; the token itself is shown once, at creation.
-- A trader acts for the nodes of team_id; an operator bids for the operator
-- account account_id.
CREATE TABLE api_tokens (
    id         bigserial PRIMARY KEY,
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    role       text NOT NULL CHECK (role IN ('trader', 'operator', 'finance', 'admin')),
    team_id    bigint REFERENCES teams (id),
    account_id bigint REFERENCES accounts (id),
    sha256     text NOT NULL UNIQUE CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    prefix     text NOT NULL, -- the first characters, to recognise it in lists
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    CHECK (role <> 'trader' OR team_id IS NOT NULL),
    CHECK (role <> 'operator' OR account_id IS NOT NULL)
);

-- Per-node HMAC keys. HMAC needs the secret on both sides, so it is kept
-- here; the database is the system of record and is protected as such.
CREATE TABLE node_keys (
    key_id     text PRIMARY KEY CHECK (key_id ~ '^nk_[0-9a-f]{16}$'),
    account_id bigint NOT NULL REFERENCES accounts (id),
    secret     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX node_keys_account ON node_keys (account_id);
