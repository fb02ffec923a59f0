"""Print the service's OpenAPI schema: `python -m hag.service.openapi > docs/openapi.json`.

tests/test_service.py fails when the published file differs from what this prints.
"""

from __future__ import annotations

import json
import sys

from hag.service.app import create_app


def schema_text() -> str:
    """The schema as published: two-space JSON, keys in FastAPI's order, a final newline."""
    return json.dumps(create_app("schema").openapi(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(schema_text())
