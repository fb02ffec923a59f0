"""Storage: where the memory lives and the rules every reader and writer shares.

The connection (db), the schema's migrations and its vocabulary (migrate, schema,
pg_support), named SQL (sqlfiles), the batch jobs' run rows (runs), the confidence history
(history), who may read an entry (visibility) and the one edge upsert (edges). Nothing here
imports a job, the read path or the service.
"""
