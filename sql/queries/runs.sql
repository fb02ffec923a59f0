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
-- Runs whose own id or Prefect flow-run id is, or starts with, what an operator typed
-- (lower-case hex with or without dashes; the caller normalises it).
SELECT run_id, flow_run_id, kind, started_at, status
FROM hag_runs
WHERE replace(run_id::text, '-', '') LIKE %(prefix)s || '%%'
   OR replace(flow_run_id::text, '-', '') LIKE %(prefix)s || '%%'
ORDER BY started_at
LIMIT 10

-- name: get_run
SELECT run_id, flow_run_id, kind, started_at, finished_at, as_of, dry_run, params, summary,
       status, status_note
FROM hag_runs WHERE run_id = %(run_id)s
