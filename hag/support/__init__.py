"""Small helpers every room uses: bounds on outside input (bounds), JSON without duplicate
keys (jsonkeys), step timing (timing), the optional extras (extras) and finding a Prefect
flow by name (orchestration)."""
