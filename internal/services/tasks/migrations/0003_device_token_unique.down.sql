DROP INDEX IF EXISTS devices_token_user_key;
