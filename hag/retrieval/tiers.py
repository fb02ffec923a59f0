"""The maturity tiers of the read path in Python: the maturity boost, once.

SQL defines the tiers once too (sql/functions/014_hag_maturity_tiers.sql): the tier number
of a maturity (hag_maturity_tier), its boost (hag_maturity_boost) and its confidence floor
(hag_entry_retrieval_floor). The resident sets hold each row's tier number as SQL gives it
and multiply by `tier_boosts(dials)[tier]`; the re-rank of SQL rows reads `maturity_boost`.
tests/test_sql_functions.py proves the two languages agree for every maturity.
"""

from __future__ import annotations

from hag.settings import Settings

# The tiers that pass the retrieval filter, numbered as hag_maturity_tier numbers them.
TIERS = ("proven", "pattern", "candidate")


def tier_boosts(dials: Settings) -> tuple[float, float, float]:
    """The seed's maturity boost of each tier, by tier number (proven 1.1, pattern 1.05, 1.0)."""
    return (dials.boost_proven, dials.boost_pattern, dials.boost_candidate)


def maturity_boost(maturity: str, dials: Settings) -> float:
    """The boost of a row's maturity (= maturity weight); any maturity outside the tiers
    ranks as a candidate, as the seed's `ELSE 1.0` does."""
    boosts = tier_boosts(dials)
    return boosts[TIERS.index(maturity)] if maturity in TIERS else boosts[-1]
