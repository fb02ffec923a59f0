-- Why: the search copy's trigger deletes and updates the rows a statement changed by probe
-- (hag_entry_search_forget, migration 185; hag_entry_search_restate, migration 195): one
-- index probe per row, by id, in the one partition that holds it. Their statements are
-- planned with hash and merge joins off, and the planner could still answer each probe
-- with a bitmap AND of the partition's id index and its index on (topic_id, ...): it did,
-- for the partitions without statistics, where the id looks as common as a topic (no
-- n_distinct). Each such probe then read every index entry of the row's topic (about
-- 24,000 at 1M), so a nightly promotion that restates 24,149 copy rows read 1.3 million
-- buffers instead of 0.45 million and took 18.9 s instead of 2.1 s (measured at load 8 on
-- a copy of the 1M + 1M bench memory taken before autovacuum had analysed the copy's
-- partitions: the state `bench nightly` sweeps in, right after its load;
-- docs/journal/2026-12-02-nightly-one-update.md). With bitmap scans off for these two
-- statements a probe is a plain index scan of the id index whatever the statistics say.
-- What the probes change is unchanged (tests/test_retrieval_search_copy.py).
ALTER FUNCTION hag_entry_search_forget(uuid[], text[], text[])
    SET enable_bitmapscan = off;
ALTER FUNCTION hag_entry_search_restate(
    uuid[], text[], text[], text[], text[], double precision[], halfvec[]
) SET enable_bitmapscan = off;
