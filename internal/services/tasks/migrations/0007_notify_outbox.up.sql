-- The notification outbox (Config.NotifyOutbox, outbox.go): a row per
-- notification, written in the transaction of the task change that
-- causes it and deleted once the webhook took it. A row is due at
-- next_attempt_at: claiming it pushes that time past the claim's lease,
-- so the row of a worker that died comes due again by itself; a failed
-- attempt sets it after a backoff. A row out of attempts keeps failed_at
-- and last_error for an operator, who can requeue it:
--   UPDATE notify_outbox SET failed_at = NULL, attempts = 0, next_attempt_at = now() WHERE failed_at IS NOT NULL;
-- user_id has no foreign key: the insert would lock the user's row in
-- every task write, and a user's devices are looked up at delivery.
CREATE TABLE notify_outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id         bigint NOT NULL,
    event           jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    failed_at       timestamptz,
    last_error      text
);
-- Workers claim the due rows in this order; failed rows are left out.
CREATE INDEX notify_outbox_due_idx ON notify_outbox (next_attempt_at) WHERE failed_at IS NULL;
