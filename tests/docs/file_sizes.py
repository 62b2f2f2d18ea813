#!/usr/bin/env python3
"""No source file under actors/, persistence/ or app/ above ~700 lines.

A file that is longer on purpose says so in its first 15 lines with a
comment containing "one piece:" followed by the reason.

  file_sizes.py ROOT   exit 1 with one line per file over the limit
"""
import pathlib
import sys

LIMIT = 750  # "about 700"
ROOMS = ("actors", "persistence", "app")


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    bad = []
    for room in ROOMS:
        for f in sorted((root / room).rglob("*")):
            if f.suffix not in (".cpp", ".hpp") or not f.is_file():
                continue
            lines = f.read_text(errors="replace").split("\n")
            if len(lines) > LIMIT and not any("one piece:" in l for l in lines[:15]):
                bad.append(f"{f.relative_to(root)}: {len(lines)} lines (limit {LIMIT})")
    for b in bad:
        print(b)
    print(f"file sizes: {len(bad)} file(s) over the limit")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
