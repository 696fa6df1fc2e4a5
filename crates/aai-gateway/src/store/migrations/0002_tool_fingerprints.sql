-- What an "always allow this tool" grant approved of the tool (docs/consent.md, "A
-- changed tool asks again"): its definition as JSON, with its fingerprint. Grants from
-- before this have none and adopt the tool as it is at its next use.
ALTER TABLE aai_grants ADD COLUMN definition TEXT;

-- The fingerprint of the tool each call ran (as the grant keeps it).
ALTER TABLE aai_history ADD COLUMN fingerprint TEXT;
