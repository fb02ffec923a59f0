"""The prompt text: three labelled blocks and the decision-tree lines (SPEC §3).

```
## TOPIC MEMORY
- [high] <advisory, clipped at a sentence boundary>
Graph edges (decision tree from top match):
  prereq:   <target_instruction[:100]>
  fallback: <target_instruction[:100]> (when: <condition>)
  next:     <target_instruction[:100]> (when: <condition>)

## TUTOR MEMORY
- [medium] <advisory>

## STUDENT PATTERNS
(none)
```
The labels of the seed's three edge types are the seed's; ours for the other two:
`related:` and `replaces:` (the match supersedes that older advice). Each walked entry
(the top `edge_walk_top_k`) that has edges gets its own tree under the seed's header.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hag.retrieval.model import Advisory
from hag.retrieval.ranking import one_line

EDGE_LABELS = {
    "prerequisite": "prereq:",
    "fallback": "fallback:",
    "leads_to": "next:",
    "related": "related:",
    "supersedes": "replaces:",
}
EDGE_HEADER = "Graph edges (decision tree from top match):"
BLOCK_TITLES = ("## TOPIC MEMORY", "## TUTOR MEMORY", "## STUDENT PATTERNS")
EMPTY_BLOCK = "(none)"


def edge_line(
    edge_type: str, target_instruction: str, condition: str | None, target_max_chars: int
) -> str:
    """One decision-tree line: label padded to the seed's column, target cut, condition."""
    line = f"  {EDGE_LABELS[edge_type]:<10}{one_line(target_instruction)[:target_max_chars]}"
    condition = one_line(condition or "")
    return f"{line} (when: {condition})" if condition else line


def advisory_line(advisory: Advisory) -> str:
    return f"- [{advisory.band}] {advisory.instruction}"


def render(
    topic: Sequence[Advisory],
    tutor: Sequence[Advisory],
    student: Sequence[Advisory],
    trees: Iterable[Sequence[str]],
) -> str:
    """The three blocks; the edge trees follow the topic advisories they grew from."""
    blocks: list[list[str]] = []
    for title, advisories in zip(BLOCK_TITLES, (topic, tutor, student), strict=True):
        lines = [title] + ([advisory_line(a) for a in advisories] or [EMPTY_BLOCK])
        blocks.append(lines)
    for tree in trees:
        if tree:
            blocks[0].extend([EDGE_HEADER, *tree])
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
