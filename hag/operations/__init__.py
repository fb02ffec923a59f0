"""Operator doors that are not scheduled jobs: loading a corpus (corpus), a learner's own
data exported or erased (privacy), and moving a memory to another embedder (reembed)."""
