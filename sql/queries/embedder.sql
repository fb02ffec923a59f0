-- name: held
-- The identity of the embedder the memory's vectors were made with (hag.vectors.embedder_identity),
-- NULL before it was recorded. One row, read once per process by every process that embeds.
SELECT (SELECT value FROM hag_meta WHERE key = 'embedder') AS identity,
       (SELECT value FROM hag_meta WHERE key = 'embedder_probe') AS probe

-- name: record
-- Record (or replace) the identity and the probe vector, in the caller's transaction.
INSERT INTO hag_meta (key, value)
VALUES ('embedder', %(identity)s), ('embedder_probe', %(probe)s)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()

-- name: sample_entries
-- A few stored entries and their vectors, to tell whether a memory that predates the record
-- was embedded by the configured embedder (the lowest ids: the same rows every time).
SELECT instruction, embedding
FROM hag_entries
ORDER BY id
LIMIT %(limit)s
