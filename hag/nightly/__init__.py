"""The nightly job: promotion, archiving and the audited cull (sweeps), and the review and
restore of culled edges from their audit (audit)."""
