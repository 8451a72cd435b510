DROP TABLE IF EXISTS notify_outbox;
