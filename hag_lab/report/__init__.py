"""Does the memory learn? Graph recovery, calibration and lifecycle figures of a simulation,
written as `reports/<name>/` (report.md, report.json, PNG plots) plus a terminal summary."""
