-- name: hold_run
-- A run's liveness: a transaction-level advisory lock in a transaction its own connection
-- keeps open until the run ends or its process dies (the server ends the transaction with
-- the connection, and a pooler closes a server connection whose client left mid-transaction).
-- Transaction-scoped, so it holds through a transaction-mode pooler.
SELECT pg_advisory_xact_lock(%(lock_class)s, hashtext(%(run_id)s::text))

-- name: idle_run
-- Then the liveness transaction waits: no idle-transaction timeout for this one (the lock
-- must outlive any such timeout), and no snapshot held meanwhile. Sent without parameters,
-- so over the simple protocol, which drops the portal of the lock's statement (an
-- extended-protocol portal keeps its snapshot, and so the server's xmin, until the next).
SET LOCAL idle_in_transaction_session_timeout = 0

-- name: running_runs
-- Rows still `running`, oldest first, locked so two reapers never judge the same row.
SELECT run_id, kind, started_at
FROM hag_runs
WHERE status = 'running' AND run_id <> ALL (%(except)s::uuid[])
ORDER BY started_at
FOR UPDATE SKIP LOCKED

-- name: working_runs
-- Runs of one kind still `running`, oldest first (after a reap: live ones).
SELECT run_id, started_at
FROM hag_runs
WHERE status = 'running' AND kind = %(kind)s
ORDER BY started_at

-- name: owner_gone
-- True when nobody holds the run's liveness lock: its process is gone. The lock taken to
-- find out is the reaper's until its transaction (which marks the row) ends.
SELECT pg_try_advisory_xact_lock(%(lock_class)s, hashtext(%(run_id)s::text)) AS gone

-- name: mark_abandoned
UPDATE hag_runs
SET status = 'abandoned', finished_at = clock_timestamp(), status_note = %(why)s
WHERE run_id = %(run_id)s AND status = 'running'

-- name: link_flow_run
-- The Prefect flow run that made this run (the id the Prefect UI shows).
UPDATE hag_runs SET flow_run_id = %(flow_run_id)s WHERE run_id = %(run_id)s

-- name: match_run
-- Runs whose own id or Prefect flow-run id starts or ends with what an operator typed
-- (lower-case hex without dashes; the caller normalises it): a prefix, or the ending the
-- listings print.
SELECT run_id, flow_run_id, kind, started_at, status
FROM hag_runs
WHERE replace(run_id::text, '-', '') LIKE %(prefix)s || '%%'
   OR replace(flow_run_id::text, '-', '') LIKE %(prefix)s || '%%'
   OR replace(run_id::text, '-', '') LIKE '%%' || %(prefix)s
   OR replace(flow_run_id::text, '-', '') LIKE '%%' || %(prefix)s
ORDER BY started_at
LIMIT 10

-- name: list_runs
-- The newest runs, of one kind or all (`hag runs`); the kind-and-time index serves a kind.
SELECT run_id, kind, status, started_at, finished_at, as_of, dry_run, flow_run_id, summary,
       status_note
FROM hag_runs
WHERE %(kind)s::text IS NULL OR kind = %(kind)s::text
ORDER BY started_at DESC, run_id
LIMIT %(limit)s

-- name: mark_cancelled
-- Runs of flow runs that were cancelled (`hag serve` stopping): closed as `cancelled` once
-- their process is gone. Rows still `running` change, and rows the stop's own signal
-- marked failed (finished since %(since)s, epoch seconds); nothing else.
UPDATE hag_runs
SET status = 'cancelled', finished_at = clock_timestamp(), status_note = %(why)s
WHERE (run_id = ANY(%(ids)s::uuid[]) OR flow_run_id = ANY(%(ids)s::uuid[]))
  AND (status = 'running' OR (status = 'failed' AND finished_at >= to_timestamp(%(since)s)))
RETURNING run_id

-- name: get_run
SELECT run_id, flow_run_id, kind, started_at, finished_at, as_of, dry_run, params, summary,
       status, status_note
FROM hag_runs WHERE run_id = %(run_id)s

-- name: record_finished_run
-- A run done in one transaction (a restore): its row is written done, with the work.
INSERT INTO hag_runs (run_id, kind, flow_run_id, params, summary, status, finished_at)
VALUES (%(run_id)s, %(kind)s, %(flow_run_id)s, %(params)s, %(summary)s, 'done', clock_timestamp())
