-- Why: operators name a run by the id the Prefect UI shows them (the flow run), while the
-- memory named it by its own run id; the two could not be joined, so `hag audit culled
-- --run <flow run id>` found nothing. A run row now records the Prefect flow run that made
-- it (NULL for a run from the command line without Prefect). And a run killed mid-way left
-- its row `running` forever: a later run now marks it `abandoned`, with when (finished_at)
-- and why (status_note), once it can tell the run's process is gone (it no longer holds the
-- run's advisory lock, hag/storage/runs.py). Existing rows keep their status; a row left `running`
-- by a process that is gone is marked by the next run.
ALTER TABLE hag_runs ADD COLUMN flow_run_id uuid;
ALTER TABLE hag_runs ADD COLUMN status_note text;

ALTER TABLE hag_runs DROP CONSTRAINT hag_runs_status_check;
ALTER TABLE hag_runs ADD CONSTRAINT hag_runs_status_check
    CHECK (status IN ('running', 'done', 'failed', 'abandoned'));

CREATE INDEX hag_runs_flow_run_idx ON hag_runs (flow_run_id) WHERE flow_run_id IS NOT NULL;
CREATE INDEX hag_runs_running_idx ON hag_runs (started_at) WHERE status = 'running';
