"""The lab beside the product: the simulator, the learning report and `hag demo`.

It studies the memory from outside, through the product's public modules (hag), and the
product never imports it (tests/test_layers.py). Its commands reach `hag` by the entry-point
group `hag.commands` (pyproject.toml); its plots need the `lab` extra (matplotlib).
"""
