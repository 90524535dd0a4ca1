"""The broker process keeps freed buffers (glibc mmap/trim thresholds raised)."""

from __future__ import annotations

import subprocess
import sys


def test_large_buffers_are_reused_instead_of_faulted_in_again():
    script = """
import resource, sys
from kafka_spark.broker.allocator import keep_freed_memory
def faults():
    for _ in range(20):
        # a frame, its records and a copy: allocated, touched (zeroed) and freed together
        held = [bytearray(4 << 20) for _ in range(3)]
        del held
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
plain = faults() - before
assert keep_freed_memory()
faults()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
kept = faults() - before
print(plain, kept)
"""
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout
    plain, kept = map(int, out.split())
    assert plain > 10_000  # 20 x 4 MiB of fresh pages
    assert kept < plain / 10
