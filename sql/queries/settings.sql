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
