"""The concept ladder: which concept an extractor's name means (SPEC §4, seed: four steps).

1. exact: the name is a canonical slug of the topic's catalogue;
2. near: its normalised form equals a canonical slug, alias or title, or its embedding's
   cosine to a canonical concept's is above `ladder_near_similarity`;
3. minted: a new slug in the topic, made from the name (drift residue);
4. `_unanchored_`: no usable name at all.
The step's quality (a dial) is recorded on the entry and scales its initial confidence.

Ours: only `catalogue` concepts anchor steps 1 and 2. A minted slug stays minted however
often it is seen again (it lands on the same slug and the same entry), so repetition never
turns drift residue into a canonical concept; and sessions never change the catalogue they
read, which keeps concurrent sessions from seeing each other half-way.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hag.operations.corpus import UNANCHORED  # one spelling of the seed's no-identity slug
from hag.settings import Settings
from hag.vectors.embeddings import normalise_rows

if TYPE_CHECKING:  # annotations only: this module opens no connection itself
    from hag.storage.db import Conn

STEPS = ("exact", "near", "minted", "unanchored")
_QUALITY_DIAL: dict[str, Callable[[Settings], float]] = {
    "exact": lambda dials: dials.ladder_quality_exact,
    "near": lambda dials: dials.ladder_quality_near,
    "minted": lambda dials: dials.ladder_quality_minted,
    "unanchored": lambda dials: dials.ladder_quality_unanchored,
}
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class Resolution:
    slug: str
    step: str
    quality: float

    @property
    def anchored(self) -> bool:
        return self.slug != UNANCHORED


def as_array(vector: Any) -> np.ndarray:
    """A float32 array from whatever the driver returned for a `vector` column."""
    if hasattr(vector, "to_numpy"):
        vector = vector.to_numpy()
    return np.asarray(vector, dtype=np.float32)


def slugify(name: str) -> str:
    """The slug a name would mint: ASCII-folded, lower case, words joined by hyphens."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return _NOT_SLUG.sub("-", folded.lower()).strip("-")


@dataclass
class Catalogue:
    """One topic's canonical concepts, as the ladder needs them."""

    topic_id: str
    slugs: frozenset[str]
    by_normal_form: Mapping[str, str]
    embedded_slugs: Sequence[str]
    embeddings: np.ndarray  # one unit row per embedded slug

    @classmethod
    def load(cls, conn: Conn, topic_id: str) -> Catalogue:
        from hag.storage.sqlfiles import query

        rows = conn.execute(query("session", "catalogue"), {"topic_id": topic_id}).fetchall()
        return cls.from_rows(topic_id, rows)

    @classmethod
    def from_rows(cls, topic_id: str, rows: Sequence[Mapping[str, Any]]) -> Catalogue:
        normal: dict[str, str] = {}
        # Slugs win over titles, titles over aliases, when two concepts claim one form.
        for r in rows:
            for alias in r.get("aliases") or ():
                normal.setdefault(slugify(alias), r["slug"])
        for r in rows:
            normal[slugify(r["title"])] = r["slug"]
        for r in rows:
            normal[slugify(r["slug"])] = r["slug"]
        normal.pop("", None)
        embedded = [r for r in rows if r.get("embedding") is not None]
        matrix = (
            np.vstack([as_array(r["embedding"]) for r in embedded])
            if embedded
            else np.zeros((0, 0), dtype=np.float32)
        )
        if len(matrix):
            matrix = normalise_rows(matrix)
        return cls(
            topic_id,
            frozenset(r["slug"] for r in rows),
            normal,
            [r["slug"] for r in embedded],
            matrix,
        )

    def lexical(self, name: str) -> tuple[str, str] | None:
        """(slug, step) from steps 1 and 2 without embeddings, or None."""
        if name in self.slugs:
            return name, "exact"
        slug = self.by_normal_form.get(slugify(name))
        return (slug, "near") if slug is not None else None

    def nearest(self, embedding: np.ndarray) -> tuple[str, float] | None:
        """The canonical concept most similar to an embedding, with its cosine."""
        if not len(self.embedded_slugs):
            return None
        sims = self.embeddings @ np.asarray(embedding, dtype=np.float32)
        best = int(np.argmax(sims))
        return self.embedded_slugs[best], float(sims[best])


def quality(step: str, dials: Settings) -> float:
    return _QUALITY_DIAL[step](dials)


def resolve_all(
    names: Sequence[str],
    catalogue: Catalogue,
    dials: Settings,
    embed: Callable[[list[str]], np.ndarray],
) -> list[Resolution]:
    """Climb the ladder for every name; names that need the embedding step are embedded once, together."""
    found: dict[str, tuple[str, str]] = {}
    for name in names:
        hit = catalogue.lexical(name)
        if hit is not None:
            found[name] = hit
    pending = sorted({n for n in names if n not in found})
    if pending and len(catalogue.embedded_slugs):
        for name, vector in zip(pending, embed(pending), strict=True):
            near = catalogue.nearest(vector)
            if near is not None and near[1] > dials.ladder_near_similarity:  # seed: "above"
                found[name] = (near[0], "near")
    out = []
    for name in names:
        slug, step = found.get(name) or _mint(name, dials)
        out.append(Resolution(slug, step, quality(step, dials)))
    return out


def _mint(name: str, dials: Settings) -> tuple[str, str]:
    slug = slugify(name)
    if len(slug) >= dials.ladder_mint_min_chars:
        return slug, "minted"
    return UNANCHORED, "unanchored"


def candidate_slug(name: str, catalogue: Catalogue) -> str:
    """The slug a name points at without embedding it: a canonical one, or what it would mint.

    Used for struggles, which name concepts but never create them.
    """
    hit = catalogue.lexical(name)
    return hit[0] if hit is not None else slugify(name)
