#!/usr/bin/python3
"""docs/reliability.md names real tests: every name in the last column of
its tables (outside parentheses, which hold a case within a test) is a
meson test of this build, so the page cannot cite a test that was renamed
or removed. A test this build leaves out (net_pcap_replay without libpcap)
counts when a meson.build under tests/ declares it by that name.
Args: SOURCE_ROOT BUILD_ROOT"""
import glob
import json
import re
import sys


def main(src, build):
    with open(f"{build}/meson-info/intro-tests.json") as f:
        tests = {t["name"] for t in json.load(f)}
    for mb in glob.glob(f"{src}/tests/**/meson.build", recursive=True):
        with open(mb) as f:
            tests |= set(re.findall(r"test\('(\w+)'", f.read()))
    cited, bad = 0, []
    with open(f"{src}/docs/reliability.md") as f:
        for n, line in enumerate(f, 1):
            if not line.startswith("| ") or line.startswith("| ---"):
                continue
            last = line.rstrip().rstrip("|").rsplit("|", 1)[-1]
            last = re.sub(r"\([^)]*\)", "", last)
            for name in re.findall(r"`([^`]+)`", last):
                cited += 1
                if name not in tests:
                    bad.append(f"line {n}: `{name}` is not a test of this build")
    for b in bad:
        print(b)
    print(f"{cited} test names cited, {len(bad)} unknown")
    return 1 if bad or not cited else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
