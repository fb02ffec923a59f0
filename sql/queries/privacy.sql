-- A learner's own data (issue 25, docs/privacy.md): what `hag learner export` writes, what
-- `hag learner erase` removes or pseudonymises, and the nightly's retention sweep. Every
-- query takes the learner id as %(learner_id)s, their private scope as %(scope)s
-- ('student:' || learner id) and, where free text is searched for the id, %(pattern)s: a
-- regular expression matching the id as a whole word (hag/operations/privacy.py builds it), and in
-- session ids %(id_in_session)s, the id between any non-alphanumeric characters (a tutor's
-- session ids often embed the learner id: `ada.lovelace-s20`).

-- name: erasure_salt
-- The per-database secret the erasure record's learner hash is salted with (migration 130).
SELECT value FROM hag_meta WHERE key = 'erasure_salt'

-- name: learner_presence
-- Whether anything is held about the learner, in any place the export and erasure cover.
SELECT EXISTS (SELECT 1 FROM hag_sessions WHERE learner_id = %(learner_id)s)
    OR EXISTS (SELECT 1 FROM hag_entries WHERE visibility_scope = %(scope)s)
    OR EXISTS (SELECT 1 FROM hag_edge_learner_reports WHERE learner_id = %(learner_id)s)
    OR EXISTS (SELECT 1 FROM hag_edge_audit_reports WHERE learner_id = %(learner_id)s)
    OR EXISTS (SELECT 1 FROM hag_learner_successes WHERE learner_id = %(learner_id)s)
    OR EXISTS (SELECT 1 FROM hag_learner_bridged WHERE learner_id = %(learner_id)s)
    OR EXISTS (SELECT 1 FROM hag_pair_withdrawn WHERE learner_id = %(learner_id)s)
    OR EXISTS (SELECT 1 FROM hag_session_quarantine
               WHERE raw ~ %(pattern)s OR reason ~ %(pattern)s OR session_id ~ %(id_in_session)s)
    AS present

-- name: erased_before
-- When a learner with this salted hash was last erased, if ever.
SELECT max(erased_at) AS erased_at FROM hag_erasures WHERE learner_hash = %(learner_hash)s

-- name: lock_sessions
-- The learner's session rows, locked: a session-end worker applying one of them finishes
-- first (its reports are then seen and pseudonymised), and none is claimed meanwhile (the
-- claim skips locked rows).
SELECT count(*)::int AS locked
FROM (SELECT 1 FROM hag_sessions WHERE learner_id = %(learner_id)s FOR UPDATE) s

-- name: collect_sessions
-- The learner's sessions, each with a fresh random pseudonym: the keys every erasure
-- statement below works from (temporary tables, gone when the transaction ends).
CREATE TEMPORARY TABLE hag_erase_sessions ON COMMIT DROP AS
SELECT session_id, 'erased-' || gen_random_uuid() AS pseudonym
FROM (SELECT session_id FROM hag_sessions WHERE learner_id = %(learner_id)s
      UNION SELECT session_id FROM hag_edge_learner_reports WHERE learner_id = %(learner_id)s
      UNION SELECT session_id FROM hag_edge_audit_reports WHERE learner_id = %(learner_id)s
      UNION SELECT session_id FROM hag_learner_successes WHERE learner_id = %(learner_id)s
      UNION SELECT session_id FROM hag_learner_bridged WHERE learner_id = %(learner_id)s) s

-- name: collect_entries
-- The learner's private entries.
CREATE TEMPORARY TABLE hag_erase_entries ON COMMIT DROP AS
SELECT id FROM hag_entries WHERE visibility_scope = %(scope)s

-- name: collect_edges
-- The edges that touch a private entry.
CREATE TEMPORARY TABLE hag_erase_edges ON COMMIT DROP AS
SELECT id FROM hag_edges
WHERE source_entry_id IN (SELECT id FROM hag_erase_entries)
   OR target_entry_id IN (SELECT id FROM hag_erase_entries)

-- name: lock_erased_edges
-- Row locks on every edge the erasure deletes or writes: those touching a private entry,
-- those the learner reported, and those its sessions created, in one sorted pass before any
-- step writes: session-end locks its edges in id order before it writes the report sums
-- (hag_edge_units), which pseudonymising the reports rewrites after them here.
SELECT count(*)::int AS locked
FROM (SELECT e.id
      FROM hag_edges e
      WHERE e.id IN (SELECT id FROM hag_erase_edges)
         OR e.id IN (SELECT edge_id FROM hag_edge_learner_reports
                     WHERE learner_id = %(learner_id)s)
         OR e.source_session_id IN (SELECT session_id FROM hag_erase_sessions)
      ORDER BY e.id
      FOR UPDATE) x

-- name: lock_erased_audits
-- Then the cull audit's rows the erasure deletes or writes, in one sorted pass: those of a
-- private entry, those keeping the learner's reports, those its sessions created or resumed.
-- Session-end locks audit rows after its edges too (evidence.sql lock_kept_audits), and a
-- session resuming a culled pair skips a locked audit row (culled_with_reports): no session
-- moves the learner's kept reports into a live edge while they are pseudonymised.
SELECT count(*)::int AS locked
FROM (SELECT a.audit_id
      FROM hag_edge_audit a
      WHERE a.source_entry_id IN (SELECT id FROM hag_erase_entries)
         OR a.target_entry_id IN (SELECT id FROM hag_erase_entries)
         OR a.audit_id IN (SELECT audit_id FROM hag_edge_audit_reports
                           WHERE learner_id = %(learner_id)s)
         OR a.source_session_id IN (SELECT session_id FROM hag_erase_sessions)
         OR a.resumed_session_id IN (SELECT session_id FROM hag_erase_sessions)
      ORDER BY a.audit_id
      FOR UPDATE) x

-- name: pseudonymise_reports
-- Who reported a prerequisite: the learner becomes one random pseudonym and each session its
-- own, so the evidence model's per-learner and per-session bounds count as before.
UPDATE hag_edge_learner_reports r
SET learner_id = %(pseudonym)s, session_id = s.pseudonym
FROM hag_erase_sessions s
WHERE r.learner_id = %(learner_id)s AND r.session_id = s.session_id

-- name: pseudonymise_audit_reports
-- The reports of deleted edges, kept beside their audit rows (migration 220), under the same
-- pseudonyms: a restore puts them back counting as before.
UPDATE hag_edge_audit_reports r
SET learner_id = %(pseudonym)s, session_id = s.pseudonym
FROM hag_erase_sessions s
WHERE r.learner_id = %(learner_id)s AND r.session_id = s.session_id

-- name: pseudonymise_successes
-- What the learner had succeeded on (the evidence model's "shown" split), under the same
-- pseudonyms.
UPDATE hag_learner_successes l
SET learner_id = %(pseudonym)s, session_id = s.pseudonym
FROM hag_erase_sessions s
WHERE l.learner_id = %(learner_id)s AND l.session_id = s.session_id

-- name: pseudonymise_bridged
-- Where the tutor supplied a missing concept in a successful turn (migration 216), under the
-- same pseudonyms.
UPDATE hag_learner_bridged b
SET learner_id = %(pseudonym)s, session_id = s.pseudonym
FROM hag_erase_sessions s
WHERE b.learner_id = %(learner_id)s AND b.session_id = s.session_id

-- name: pseudonymise_withdrawn
-- The learner's reports withdrawn as contradicted, counted per pair (migration 223), under the
-- same learner pseudonym: the evidence model's per-learner cap counts them as before.
UPDATE hag_pair_withdrawn w
SET learner_id = %(pseudonym)s
WHERE w.learner_id = %(learner_id)s

-- name: pseudonymise_history_sessions
-- The shared graph's confidence history keeps its numbers; the session it names becomes the
-- session's pseudonym.
UPDATE hag_confidence_history h
SET session_id = s.pseudonym
FROM hag_erase_sessions s
WHERE h.session_id = s.session_id

-- name: pseudonymise_edge_sessions
-- A learned edge's provenance: the session that created it, as its pseudonym.
UPDATE hag_edges e
SET source_session_id = s.pseudonym
FROM hag_erase_sessions s
WHERE e.source_session_id = s.session_id

-- name: pseudonymise_audit_sessions
-- The same provenance in the cull audit (culled and restored edges), and the session that
-- resumed a culled edge's reports in a new edge of its pair (migration 220).
UPDATE hag_edge_audit a
SET source_session_id = COALESCE((SELECT s.pseudonym FROM hag_erase_sessions s
                                  WHERE s.session_id = a.source_session_id),
                                 a.source_session_id),
    resumed_session_id = COALESCE((SELECT s.pseudonym FROM hag_erase_sessions s
                                   WHERE s.session_id = a.resumed_session_id),
                                  a.resumed_session_id)
WHERE a.source_session_id IN (SELECT session_id FROM hag_erase_sessions)
   OR a.resumed_session_id IN (SELECT session_id FROM hag_erase_sessions)

-- name: erase_private_history
-- The confidence history of the learner's private entries and of the edges that touch them.
DELETE FROM hag_confidence_history
WHERE entity_id IN (SELECT id FROM hag_erase_entries UNION ALL SELECT id FROM hag_erase_edges)

-- name: erase_maturity_history
DELETE FROM hag_maturity_history WHERE entry_id IN (SELECT id FROM hag_erase_entries)

-- name: erase_enrichment_ledger
DELETE FROM hag_enrichment_ledger WHERE entry_id IN (SELECT id FROM hag_erase_entries)

-- name: erase_llm_calls
DELETE FROM hag_llm_calls WHERE entry_id IN (SELECT id FROM hag_erase_entries)

-- name: erase_private_edges
-- Edges that touch a private entry (their reports go with them; the audit trigger copies
-- them, and erase_private_audit removes the copies with every earlier one).
DELETE FROM hag_edges WHERE id IN (SELECT id FROM hag_erase_edges)

-- name: erase_private_resume_pending
-- The resumptions waiting for the nightly (migration 226) of a culled edge touching a
-- private entry or out of one (ids only, but of the learner's entries). Before the audit
-- rows go; the waiting re-weighs of a private entry go with it (migration 224's key).
DELETE FROM hag_resume_pending
WHERE source_entry_id IN (SELECT id FROM hag_erase_entries)
   OR audit_id IN (SELECT a.audit_id FROM hag_edge_audit a
                   WHERE a.source_entry_id IN (SELECT id FROM hag_erase_entries)
                      OR a.target_entry_id IN (SELECT id FROM hag_erase_entries))

-- name: count_erased_culls
-- The cull audit rows the next statement deletes, counted per run (run ids and counts only):
-- the audit-completeness check (hag_quality_cull_runs, migration 232) adds them back to what
-- each run audited, so an erasure does not fail it for good.
INSERT INTO hag_erased_culls AS x (run_id, erased)
SELECT a.run_id, count(*)
FROM hag_edge_audit a
WHERE a.reason = 'cull' AND a.run_id IS NOT NULL
  AND (a.source_entry_id IN (SELECT id FROM hag_erase_entries)
       OR a.target_entry_id IN (SELECT id FROM hag_erase_entries))
GROUP BY a.run_id
ON CONFLICT (run_id) DO UPDATE SET erased = x.erased + EXCLUDED.erased

-- name: erase_private_audit
-- (their copied reports go with them: migration 220's key cascades)
DELETE FROM hag_edge_audit
WHERE source_entry_id IN (SELECT id FROM hag_erase_entries)
   OR target_entry_id IN (SELECT id FROM hag_erase_entries)

-- name: erase_private_withdrawn
-- The withdrawn reports counted on pairs that touch a private entry (migration 223).
DELETE FROM hag_pair_withdrawn
WHERE source_entry_id IN (SELECT id FROM hag_erase_entries)
   OR target_entry_id IN (SELECT id FROM hag_erase_entries)

-- name: erase_private_entries
DELETE FROM hag_entries WHERE id IN (SELECT id FROM hag_erase_entries)

-- name: erase_private_graph_counts
-- The concept counts of the learner's own graphs (migration 228): their scope names the
-- learner, and with the learner's entries gone each such graph counts none.
DELETE FROM hag_graph_concepts WHERE visibility_scope = %(scope)s

-- name: erase_quarantine
-- Refused payloads of the learner: by session id, or naming the learner in the received
-- text (a bounded prefix, so not always parseable JSON), the reason or the session id (after
-- the retention sweep emptied the text, the session id may be all that names them).
DELETE FROM hag_session_quarantine
WHERE session_id IN (SELECT session_id FROM hag_erase_sessions)
   OR raw ~ %(pattern)s OR reason ~ %(pattern)s OR session_id ~ %(id_in_session)s

-- name: erase_run_rejections
-- Session-end runs list the sessions they rejected, with the reason (which may name the
-- learner): the learner's entries leave the list; the run's counts stay.
UPDATE hag_runs r
SET summary = jsonb_set(r.summary, '{rejected}', COALESCE((
        SELECT jsonb_agg(x ORDER BY n)
        FROM jsonb_array_elements(r.summary -> 'rejected') WITH ORDINALITY AS j (x, n)
        WHERE NOT (x ->> 'session_id' IN (SELECT session_id FROM hag_erase_sessions)
                   OR x::text ~ %(pattern)s)), '[]'::jsonb))
WHERE jsonb_typeof(r.summary -> 'rejected') = 'array'
  AND EXISTS (SELECT 1 FROM jsonb_array_elements(r.summary -> 'rejected') x
              WHERE x ->> 'session_id' IN (SELECT session_id FROM hag_erase_sessions)
                 OR x::text ~ %(pattern)s)

-- name: erase_sessions
DELETE FROM hag_sessions WHERE learner_id = %(learner_id)s

-- name: record_erasure
-- The audit of the erasure: when, by whom, the salted hash, the counts. Never the data.
INSERT INTO hag_erasures (erased_by, learner_hash, counts)
VALUES (%(erased_by)s, %(learner_hash)s, %(counts)s::jsonb)
RETURNING erasure_id, erased_at

-- name: record_erased_sessions
-- A tombstone per erased session (migration 131): the same payload sent again is refused at
-- ingest instead of being applied a second time.
INSERT INTO hag_erased_sessions (session_hash, erasure_id)
SELECT hag_erased_session_hash(session_id), %(erasure_id)s FROM hag_erase_sessions
ON CONFLICT (session_hash) DO NOTHING

-- name: export_sessions
-- The learner's sessions, payloads as kept (as received, unless retention stripped them).
SELECT 'hag_sessions' AS tbl, to_jsonb(s)::text AS row
FROM hag_sessions s WHERE s.learner_id = %(learner_id)s ORDER BY s.ended_at, s.session_id

-- name: export_entries
SELECT 'hag_entries' AS tbl, to_jsonb(e)::text AS row
FROM hag_entries e WHERE e.visibility_scope = %(scope)s ORDER BY e.created_at, e.id

-- name: export_edges
-- Edges that touch one of the learner's private entries.
SELECT 'hag_edges' AS tbl, to_jsonb(e)::text AS row
FROM hag_edges e
WHERE e.source_entry_id IN (SELECT id FROM hag_entries WHERE visibility_scope = %(scope)s)
   OR e.target_entry_id IN (SELECT id FROM hag_entries WHERE visibility_scope = %(scope)s)
ORDER BY e.created_at, e.id

-- name: export_confidence_history
-- The history of their private entries (and edges touching them), and every change their
-- sessions made to the shared graph.
SELECT 'hag_confidence_history' AS tbl, to_jsonb(h)::text AS row
FROM hag_confidence_history h
WHERE h.session_id IN (SELECT session_id FROM hag_sessions WHERE learner_id = %(learner_id)s)
   OR h.entity_id IN (SELECT id FROM hag_entries WHERE visibility_scope = %(scope)s)
   OR h.entity_id IN (
        SELECT x.id FROM hag_edges x JOIN hag_entries p
          ON p.id IN (x.source_entry_id, x.target_entry_id)
        WHERE p.visibility_scope = %(scope)s)
ORDER BY h.history_id

-- name: export_maturity_history
SELECT 'hag_maturity_history' AS tbl, to_jsonb(h)::text AS row
FROM hag_maturity_history h
WHERE h.entry_id IN (SELECT id FROM hag_entries WHERE visibility_scope = %(scope)s)
ORDER BY h.history_id

-- name: export_reports
SELECT 'hag_edge_learner_reports' AS tbl, to_jsonb(r)::text AS row
FROM hag_edge_learner_reports r WHERE r.learner_id = %(learner_id)s
ORDER BY r.reported_at, r.session_id, r.edge_id

-- name: export_audit_reports
-- The learner's reports of edges since deleted, kept beside the audit rows (migration 220).
SELECT 'hag_edge_audit_reports' AS tbl, to_jsonb(r)::text AS row
FROM hag_edge_audit_reports r WHERE r.learner_id = %(learner_id)s
ORDER BY r.reported_at, r.session_id, r.audit_id

-- name: export_successes
SELECT 'hag_learner_successes' AS tbl, to_jsonb(l)::text AS row
FROM hag_learner_successes l WHERE l.learner_id = %(learner_id)s
ORDER BY l.ended_at, l.session_id, l.concept_slug

-- name: export_bridged
SELECT 'hag_learner_bridged' AS tbl, to_jsonb(b)::text AS row
FROM hag_learner_bridged b WHERE b.learner_id = %(learner_id)s
ORDER BY b.ended_at, b.session_id, b.concept_slug, b.supplied_slug

-- name: export_withdrawn
-- The learner's reports withdrawn as contradicted, counted per pair (migration 223).
SELECT 'hag_pair_withdrawn' AS tbl, to_jsonb(w)::text AS row
FROM hag_pair_withdrawn w WHERE w.learner_id = %(learner_id)s
ORDER BY w.source_entry_id, w.target_entry_id

-- name: export_quarantine
SELECT 'hag_session_quarantine' AS tbl, to_jsonb(q)::text AS row
FROM hag_session_quarantine q
WHERE q.session_id IN (SELECT session_id FROM hag_sessions WHERE learner_id = %(learner_id)s)
   OR q.raw ~ %(pattern)s OR q.reason ~ %(pattern)s OR q.session_id ~ %(id_in_session)s
ORDER BY q.quarantine_id

-- name: retention_strip_sessions
-- The retention sweep: the student's words out of the payloads of sessions that ended more
-- than message_retention_days before as_of and were processed (or rejected); the row is
-- stamped, so a second sweep finds nothing, and a stripped session cannot be queued again.
UPDATE hag_sessions
SET payload = hag_strip_messages(payload), stripped_at = %(at)s
WHERE status IN ('processed', 'rejected') AND stripped_at IS NULL
  AND ended_at < %(as_of)s - make_interval(days => %(days)s)

-- name: retention_strip_quarantine
-- The quarantine's received text, older than quarantine_retention_days; the reason, the
-- size and the SHA-256 of what was received stay.
UPDATE hag_session_quarantine
SET raw = '', stripped_at = %(at)s
WHERE stripped_at IS NULL AND received_at < %(as_of)s - make_interval(days => %(days)s)

-- name: retention_forecast_sessions
SELECT count(*)::int AS n FROM hag_sessions
WHERE status IN ('processed', 'rejected') AND stripped_at IS NULL
  AND ended_at < %(as_of)s - make_interval(days => %(days)s)

-- name: retention_forecast_quarantine
SELECT count(*)::int AS n FROM hag_session_quarantine
WHERE stripped_at IS NULL AND received_at < %(as_of)s - make_interval(days => %(days)s)
