"""The extractor's error kinds and the worlds a multi-seed report runs them on (issue 29).

An error kind is a set of extractor options over the independent noise, named so a report
can list them: `independent:X` (p_miss = p_false = X, nothing else), `repeated:S` (the
independent noise at `BASE_NOISE`, plus a share S of sessions whose extractor misreads one
pair and repeats it), `misconception:S` (the same noise, plus a share S of learners who
name one wrong prerequisite whenever they fail at its concept), `shared-misconception:S`
(the same, every one of those learners holding one pair drawn for the world). `all` is
`ALL_KINDS`.

A world is `cryptography`, `random` (the bare random DAG, no authored edges: `--concepts`
concepts) or `random:N` (`random_topic`: N concepts, 30-60, with authored prerequisites
and three wrong ones, like Cryptography's).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hag.errors import HagError
from hag_lab.simulate.world import World, cryptography_world, random_topic, random_world

BASE_NOISE = 0.1  # the independent noise under the persistent kinds (the goals)
DEFAULT_SHARE = {"repeated": 0.2, "misconception": 0.1, "shared-misconception": 0.1}
ALL_KINDS = ("independent:0.1", "independent:0.3", "repeated:0.2", "misconception:0.1")


@dataclass(frozen=True)
class ErrorKind:
    name: str
    p_miss: float
    p_false: float
    p_repeat_session: float = 0.0
    misconception_share: float = 0.0
    misconception_shared: bool = False

    def options(self) -> dict[str, Any]:
        """The `SimulationConfig` fields this kind sets."""
        return {
            "p_miss": self.p_miss,
            "p_false": self.p_false,
            "p_repeat_session": self.p_repeat_session,
            "misconception_share": self.misconception_share,
            "misconception_shared": self.misconception_shared,
        }


def error_kind(spec: str) -> ErrorKind:
    """One kind from `name[:value]` (HagError, one line, on anything else)."""
    name, _, value = spec.strip().partition(":")
    if name not in ("independent", "repeated", "misconception", "shared-misconception"):
        raise HagError(
            f"error kind {spec!r}: takes independent[:NOISE], repeated[:SHARE], "
            "misconception[:SHARE] or shared-misconception[:SHARE]"
        )
    try:
        x = (
            float(value)
            if value
            else (BASE_NOISE if name == "independent" else DEFAULT_SHARE[name])
        )
    except ValueError:
        raise HagError(f"error kind {spec!r}: {value!r} is not a number") from None
    if not 0 <= x <= 1:
        raise HagError(f"error kind {spec!r}: {x} is outside 0-1")
    label = f"{name}:{x:g}"
    if name == "independent":
        return ErrorKind(label, x, x)
    if name == "repeated":
        return ErrorKind(label, BASE_NOISE, BASE_NOISE, p_repeat_session=x)
    return ErrorKind(
        label,
        BASE_NOISE,
        BASE_NOISE,
        misconception_share=x,
        misconception_shared=name == "shared-misconception",
    )


def error_kinds(text: str) -> list[ErrorKind]:
    """Comma-separated kinds, or `all`; distinct."""
    specs = list(ALL_KINDS) if text.strip() == "all" else [p for p in text.split(",") if p.strip()]
    kinds = [error_kind(p) for p in specs]
    names = [k.name for k in kinds]
    if not kinds or len(set(names)) != len(names):
        raise HagError(f"error kinds {text!r}: name at least one kind, each once")
    return kinds


def make_world(spec: str, *, seed: int, concepts: int) -> tuple[World, Mapping[str, Any] | None]:
    """The world and starting corpus (None: one entry per concept, no edges) of a spec."""
    import numpy as np

    name, _, size = spec.strip().partition(":")
    if name == "cryptography" and not size:
        from hag.operations.corpus import DEMO_CORPUS

        corpus = json.loads(DEMO_CORPUS.read_text())
        return cryptography_world(corpus), corpus
    if name == "random" and not size:
        return random_world(np.random.default_rng(seed), concepts), None
    if name == "random" and size.isdigit():
        return random_topic(seed, int(size))
    raise HagError(f"world {spec!r}: takes cryptography, random or random:N (N from 30 to 60)")


def folder_name(spec: str) -> str:
    """A world's or kind's name as a folder name (no colon)."""
    return spec.replace(":", "-")
