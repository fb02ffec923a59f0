"""`make bench`: run every benchmark module in turn (each prints its own figures), then
compare the figures they recorded with bench/recorded.json (bench/figures.py): the exit
status is 1 when one moved by more than the recorded tolerance."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from hag.config import ensure_runtime_dir

    ensure_runtime_dir()  # before anything imports the embedded server's wheel
    wanted = set(argv)
    names = sorted(
        m.name
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if m.name.startswith("bench_")
    )
    for name in names:
        if wanted and name not in wanted and name.removeprefix("bench_") not in wanted:
            continue
        print(f"\n===== {name} =====", flush=True)
        importlib.import_module(f"bench.{name}").main()
    from bench import figures

    return 1 if figures.report(figures.measured()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
