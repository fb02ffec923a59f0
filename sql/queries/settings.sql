-- name: lock_dials
-- Taken by every writer of the dials (hag.settings: set, reset, a profile) before it reads
-- the values it validates a combination against, and held to its commit. SHARE ROW
-- EXCLUSIVE conflicts with itself (and with migrate's registry sync) but not with readers:
-- two writers of an ordered pair (`edge_confidence_ceiling` 0.7 and `edge_new_confidence`
-- 0.95 at once) take turns, and the second validates against the first's committed value,
-- so no combination commits that was not validated as a whole (issue 24: write skew).
LOCK TABLE hag_settings IN SHARE ROW EXCLUSIVE MODE

-- name: stored_dials
-- Every dial's stored value (hag.settings.load validates each on read).
SELECT key, value FROM hag_settings

-- name: owe_reweigh
-- A model dial moved while another dial's stored value was invalid: the confidences were not
-- re-weighed under it, so the next dial write that leaves every dial valid re-weighs them.
INSERT INTO hag_meta (key, value) VALUES ('reweigh_owed', %(key)s)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()

-- name: reweigh_owed
SELECT value FROM hag_meta WHERE key = 'reweigh_owed'

-- name: reweigh_paid
DELETE FROM hag_meta WHERE key = 'reweigh_owed'
