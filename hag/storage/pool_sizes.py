"""The writers' pool's size, and what it allows: read by the CLI's and the flow's bounds
without importing the database driver.

The writers' pool (`db.pool()`) holds `WRITE_CONNECTIONS`; session workers hold one each
for a whole batch, so at most `MAX_SESSION_WORKERS` run at once: two connections stay free
for what a worker reads beside its own connection (the settings cache, the run record),
which would otherwise wait for the pool and time out.
"""

WRITE_CONNECTIONS = 8
MAX_SESSION_WORKERS = WRITE_CONNECTIONS - 2
