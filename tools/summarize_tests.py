#!/usr/bin/env python3
"""summarize_tests.py: reads meson's testlog.json, or a JUnit XML file (pytest's
--junitxml, by its .xml name), and prints "passed failed skipped"."""
import json
import sys
import xml.etree.ElementTree as ET


def junit(path):
    """pytest's counts: errors (a failed fixture, a test file that did not import)
    are failures too."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    p = f = s = 0
    for suite in suites:
        total = int(suite.get("tests", 0))
        bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skip = int(suite.get("skipped", 0))
        p, f, s = p + total - bad - skip, f + bad, s + skip
    return p, f, s


if sys.argv[1].endswith(".xml"):
    print(*junit(sys.argv[1]))
    sys.exit(0)

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
