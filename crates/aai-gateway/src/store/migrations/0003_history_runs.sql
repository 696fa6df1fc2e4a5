-- The script run or batch each call was part of (`run-…`, `batch-…`; docs/workflows.md).
ALTER TABLE aai_history ADD COLUMN run TEXT;
CREATE INDEX IF NOT EXISTS aai_history_run ON aai_history (run) WHERE run IS NOT NULL;
