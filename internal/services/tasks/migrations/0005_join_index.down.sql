DROP INDEX IF EXISTS task_details_task_id_idx;
