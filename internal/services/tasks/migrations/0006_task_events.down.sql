DROP TABLE IF EXISTS task_events;
DROP TABLE IF EXISTS task_event_seqs;
