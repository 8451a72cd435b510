-- Report C's optimization 3 for its GET: an index on the LEFT JOIN's
-- column, so that the task's GET finds its details row by an index scan
-- instead of scanning task_details, and so does the cascade of a task's
-- delete. (The GET's ORDER BY column is tasks' primary key, indexed
-- either way; the list's ORDER BY columns are 0002's.) Deopt.NoIndexes
-- reverts it with 0002.
CREATE INDEX task_details_task_id_idx ON task_details (task_id);
