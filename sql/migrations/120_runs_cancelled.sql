-- Why: a flow run that its operator stops (`hag serve` ending on Ctrl-C or SIGTERM cancels the
-- runs its worker started, a paused big night among them) is neither done nor failed, and
-- `abandoned` says its process died unseen. The run ledger now says `cancelled` for it, as
-- the Prefect UI does for its flow run. Existing rows keep their status.
ALTER TABLE hag_runs DROP CONSTRAINT hag_runs_status_check;
ALTER TABLE hag_runs ADD CONSTRAINT hag_runs_status_check
    CHECK (status IN ('running', 'done', 'failed', 'abandoned', 'cancelled'));
