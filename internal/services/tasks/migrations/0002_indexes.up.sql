-- Report C's optimization 3: indexes on the JOIN and ORDER BY columns,
-- one per way the API reads a user's tasks, so that a page reads about
-- its own rows, not all of the user's (nor, without user_id, the table):
-- the default list (newest first) and its pages, the status filter, and
-- the due-date and priority sorts. Notification jobs find a user's
-- devices by user_id. Each index costs every insert and delete of a task
-- (and an update of its status or priority) one more index entry.
-- (On a live database with traffic, build them CONCURRENTLY, outside a
-- transaction.)
CREATE INDEX tasks_user_created_idx ON tasks (user_id, created_at DESC, id DESC);
CREATE INDEX tasks_user_status_idx ON tasks (user_id, status, created_at DESC, id DESC);
CREATE INDEX tasks_user_due_idx ON tasks (user_id, due_at, id);
CREATE INDEX tasks_user_priority_idx ON tasks (user_id, priority DESC, id DESC);
CREATE INDEX devices_user_idx ON devices (user_id);
