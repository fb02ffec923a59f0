"""The schema's vocabulary in Python: the closed sets of values migration 001 admits.

Named once here for the code that checks input before it reaches the database (a corpus
file, an edge observation, a dial's choices); tests/test_schema.py holds them equal to the
constraints themselves.
"""

from __future__ import annotations

# hag_edges.edge_type's CHECK, in the seed's teaching order.
EDGE_TYPES = ("prerequisite", "fallback", "leads_to", "related", "supersedes")
# The provenance classes the code writes (hag_edges.source_type admits any slug).
KNOWN_SOURCE_TYPES = ("seed", "learned", "enriched")
# The largest value of a PostgreSQL `integer` (a LIMIT, a count bound as ::integer): a larger
# count given by a caller is refused by name before it reaches the database.
PG_INT_MAX = 2**31 - 1
