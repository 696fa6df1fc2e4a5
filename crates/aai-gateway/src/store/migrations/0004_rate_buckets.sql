-- Rate limit buckets shared by the replicas (docs/rate-limits.md): one row per person or
-- app, taken from in one statement per call. `burst` and `rate` (calls a second) are the
-- limit the bucket was last taken under, so that full buckets can be dropped.
CREATE TABLE IF NOT EXISTS aai_rate_buckets (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    tokens DOUBLE PRECISION NOT NULL,
    at TIMESTAMPTZ NOT NULL,
    burst DOUBLE PRECISION NOT NULL,
    rate DOUBLE PRECISION NOT NULL,
    granted BOOLEAN NOT NULL,
    PRIMARY KEY (scope, key)
);
