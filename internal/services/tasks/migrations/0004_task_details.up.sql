-- A task's details (its notes), a has-one association kept in a table of
-- its own, as report C's GORM model had one: the task's GET reads them
-- with a LEFT JOIN, the query GORM's Joins preload and First write
-- (store.go, TaskQuery). Every task has one row, made with the task and
-- deleted with it. task_id, the join column, is left unindexed here, as
-- GORM's AutoMigrate leaves a foreign key (no UNIQUE either: it would
-- index it): its index is report C's optimization 3 (0005), which
-- Deopt.NoIndexes reverts, and without it the join and the delete's
-- cascade scan the whole table.
CREATE TABLE task_details (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id    bigint NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    notes      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);
-- Tasks made before this migration get their (empty) details.
INSERT INTO task_details (task_id) SELECT id FROM tasks ORDER BY id;
