-- The shared store of a team's gateways (docs/storage.md). One statement list, applied
-- in one transaction with its version row.

-- "Always allow" grants: as `state.db`'s `grants`.
CREATE TABLE aai_grants (
    caller TEXT NOT NULL,
    app TEXT NOT NULL,
    tool TEXT NOT NULL,
    granted_at BIGINT NOT NULL,
    cert TEXT,
    PRIMARY KEY (caller, app, tool)
);

-- Calls waiting for consent (or refused and kept for their retry), on any replica. The
-- replica that asked owns the row: an answer given anywhere is written here, and the
-- owner takes it (NOTIFY, or polling when its listening connection is down).
CREATE TABLE aai_pending (
    id BIGSERIAL PRIMARY KEY,
    replica TEXT NOT NULL,
    caller TEXT NOT NULL,
    app TEXT NOT NULL,
    once_tool TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    waiting BOOLEAN NOT NULL,
    info JSONB NOT NULL,
    answer TEXT,
    taken BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX aai_pending_answers ON aai_pending (replica) WHERE answer IS NOT NULL AND NOT taken;

-- Call history: as `state.db`'s `history`. (replica, seq) makes a batch written again
-- after a lost acknowledgement land once.
CREATE TABLE aai_history (
    id BIGSERIAL PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    caller TEXT NOT NULL,
    person TEXT,
    app TEXT NOT NULL,
    asked TEXT,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    status TEXT NOT NULL,
    code TEXT,
    duration_ms BIGINT NOT NULL,
    excerpt TEXT NOT NULL,
    replica TEXT NOT NULL,
    seq BIGINT NOT NULL,
    UNIQUE (replica, seq)
);
CREATE INDEX aai_history_at ON aai_history (at_ms);
CREATE INDEX aai_history_person ON aai_history (person, at_ms);

-- Credentials, sealed with XChaCha20-Poly1305 (the key is never in the database); the
-- associated data binds each to its account (app id and name), so rows cannot be
-- swapped. `key_id` names the key that sealed it (a hash, not the key).
CREATE TABLE aai_credentials (
    account TEXT PRIMARY KEY,
    nonce BYTEA NOT NULL,
    sealed BYTEA NOT NULL,
    key_id TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
