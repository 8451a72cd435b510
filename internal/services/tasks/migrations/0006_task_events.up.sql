-- The event log of --events postgres: every task change writes its event
-- here in the change's own transaction, numbered per user, so that an
-- instance other than the one that made the change can deliver it, and a
-- device that missed some can read them again (GET /v1/ws?after_seq=).
-- Empty under the default --events local.
--
-- task_event_seqs holds each user's last sequence number. A change takes
-- the next one by updating this row, which locks it until the change
-- commits: a user's changes take their numbers one after another, each
-- after the previous one committed, so sequence order is commit order for
-- a user, without gaps (a rolled-back change gives its number back). A
-- table-wide sequence would not do: numbers are taken before commit, and
-- commits may land in another order. The row outlives the events that
-- retention deletes, so numbers never restart.
CREATE TABLE task_event_seqs (
    user_id bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    seq     bigint NOT NULL
);

-- body is the event's JSON without its sequence; at is when the change
-- wrote it, just before its commit (clock_timestamp): retention deletes
-- by it, and delivery lag is measured from it.
CREATE TABLE task_events (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    seq     bigint NOT NULL,
    at      timestamptz NOT NULL,
    body    text NOT NULL,
    PRIMARY KEY (user_id, seq)
);
CREATE INDEX task_events_at_idx ON task_events (at);
