-- The WebSocket tickets used (GET /v1/ws?ticket=), by their MAC, until
-- they expire (TicketTTL after they were issued): a ticket is good once on
-- every instance of the deployment together, not once on each. Expired
-- rows are deleted a few at a time by the statement that claims a ticket.
-- UNLOGGED: after a database crash the table comes back empty, so a
-- ticket used in the last TicketTTL (30 s) before the crash could be used
-- once more; the bearer token it stands for stays valid far longer.
CREATE UNLOGGED TABLE used_tickets (
    mac   bytea PRIMARY KEY,
    until timestamptz NOT NULL
);
CREATE INDEX used_tickets_until_idx ON used_tickets (until);
