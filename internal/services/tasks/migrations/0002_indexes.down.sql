DROP INDEX IF EXISTS tasks_user_created_idx;
DROP INDEX IF EXISTS tasks_user_status_idx;
DROP INDEX IF EXISTS tasks_user_due_idx;
DROP INDEX IF EXISTS tasks_user_priority_idx;
DROP INDEX IF EXISTS devices_user_idx;
