DROP TABLE IF EXISTS rate_buckets;
