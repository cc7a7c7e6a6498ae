#!/usr/bin/env python3
"""summarize_tests.py: reads meson's testlog.json and prints "passed failed skipped"."""
import json
import sys

passed = failed = skipped = 0
with open(sys.argv[1]) as f:
    for line in f:
        if not line.strip():
            continue
        result = json.loads(line)["result"]
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
print(passed, failed, skipped)
