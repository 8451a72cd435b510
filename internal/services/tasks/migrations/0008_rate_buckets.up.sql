-- The login and sign-up token buckets shared by every instance
-- (Config.LoginLimits "postgres", ratelimit_postgres.go): a row per limit
-- (name) and key (an address, an email), its tokens as counted at `at`.
-- full_at is when the bucket is full again, the same as no row, so rows
-- past it are swept. UNLOGGED: a bucket is written on every attempt and
-- worth nothing after a database crash or on a standby, where the table
-- comes back empty: every limit then starts full, as it does when one
-- instance restarts with the in-process buckets.
CREATE UNLOGGED TABLE rate_buckets (
    name    text NOT NULL,
    key     text NOT NULL,
    tokens  float8 NOT NULL,
    at      timestamptz NOT NULL,
    full_at timestamptz NOT NULL,
    ok      boolean NOT NULL, -- whether the last attempt took a token
    PRIMARY KEY (name, key)
);
CREATE INDEX rate_buckets_full_at_idx ON rate_buckets (full_at);
