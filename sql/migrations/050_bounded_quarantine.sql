-- Why: a refused payload of 100 MB was kept whole in the quarantine (issue 11). The quarantine
-- now keeps a bounded prefix of what was received (dial session_quarantine_max_bytes) with the
-- SHA-256 and the size of the whole, which is enough to recognise the payload and to ask the
-- sender for it again. Rows already quarantined keep their full text; their digest and size
-- are computed from it, so every row answers the same two questions.
ALTER TABLE hag_session_quarantine ADD COLUMN raw_bytes bigint;
ALTER TABLE hag_session_quarantine ADD COLUMN raw_sha256 text;

UPDATE hag_session_quarantine
SET raw_bytes = octet_length(raw),
    raw_sha256 = encode(sha256(convert_to(raw, 'UTF8')), 'hex');

ALTER TABLE hag_session_quarantine ALTER COLUMN raw_bytes SET NOT NULL;
ALTER TABLE hag_session_quarantine ALTER COLUMN raw_sha256 SET NOT NULL;
ALTER TABLE hag_session_quarantine
    ADD CONSTRAINT hag_session_quarantine_raw_sha256_shape CHECK (raw_sha256 ~ '^[0-9a-f]{64}$');
