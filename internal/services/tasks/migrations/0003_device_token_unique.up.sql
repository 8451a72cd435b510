-- A push token is registered once per user: registering it again is the
-- same device (its platform updated), not a copy that every notification
-- would carry again. Copies left by older versions go first, the oldest
-- kept. The index is on md5 of the token, then the user: a btree entry
-- must fit in a third of a page (about 2.7 KB) and tokens may be 4 KB;
-- and with the user second it serves no lookup of a user's devices,
-- which is 0002's devices_user_idx (dropped with --indexes=false).
DELETE FROM devices d USING devices e
    WHERE d.user_id = e.user_id AND d.push_token = e.push_token AND d.id > e.id;
CREATE UNIQUE INDEX devices_token_user_key ON devices (md5(push_token), user_id);
