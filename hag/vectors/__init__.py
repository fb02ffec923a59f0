"""Vectors: the embedders (embeddings) and the identity of the one that made a memory's
vectors (embedder_identity)."""
