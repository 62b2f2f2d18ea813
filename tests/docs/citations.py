#!/usr/bin/env python3
"""Design citations resolve to docs/design.md.

Code, scripts and docs cite "problem N" (a failure the engine prevents) and
"I<n>" (an invariant its tests prove). This check makes sure that every cited
number exists in docs/design.md, that every doc links its citations there and
that every source file citing one names docs/design.md.

  citations.py ROOT          check, exit 1 with one line per violation
  citations.py ROOT --link   rewrite bare citations in docs/*.md as links
"""
import pathlib
import re
import sys

CITE = re.compile(r"(?<![\w\[/#-])(?:[Pp]roblems? (\d+)(?:[–-](\d+))?|I(\d{1,2}))(?![\w\]])")
SOURCES = ("*.cpp", "*.hpp", "*.lua", "*.sh", "*.py", "*.cmake")
SKIP_DIRS = {".git", "build", "node_modules"}


def anchors(design):
    text = design.read_text()
    problems = {int(x) for x in re.findall(r'id="problem-(\d+)"', text)}
    invariants = {int(x) for x in re.findall(r'id="I(\d+)"', text)}
    return problems, invariants


def files(root, patterns):
    for pat in patterns:
        for f in root.rglob(pat):
            parts = f.relative_to(root).parts
            # Build trees: build/ and its siblings (build-fuzz/ of bench/run
            # fuzz, ...), as in .gitignore.
            if not SKIP_DIRS.intersection(parts) and not parts[0].startswith("build"):
                yield f


def cited(line):
    """(kind, number) of every citation on one line."""
    for m in CITE.finditer(line):
        if m.group(3):
            yield "I", int(m.group(3)), m
        else:
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) else lo
            for n in range(lo, hi + 1):
                yield "problem", n, m


def prose_lines(text):
    """Lines of a Markdown text outside code fences, with their indices."""
    fence = False
    for i, line in enumerate(text.split("\n")):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            yield i, line


def link(root):
    for doc in (root / "docs").glob("*.md"):
        if doc.name == "design.md":
            continue
        lines = doc.read_text().split("\n")
        for i, line in prose_lines("\n".join(lines)):
            def repl(m):
                if m.group(3):
                    return f"[I{m.group(3)}](design.md#I{m.group(3)})"
                return f"[{m.group(0)}](design.md#problem-{m.group(1)})"
            lines[i] = CITE.sub(repl, line)
        doc.write_text("\n".join(lines))


def check(root):
    problems, invariants = anchors(root / "docs" / "design.md")
    bad = []
    known = {"problem": problems, "I": invariants}
    for f in list(files(root, SOURCES)) + list(files(root, ("*.md",))):
        rel = f.relative_to(root)
        if rel.as_posix() == "docs/design.md":
            continue
        text = f.read_text(errors="replace")
        lines = (prose_lines(text) if f.suffix == ".md"
                 else enumerate(text.split("\n")))
        any_cite = False
        for i, line in lines:
            for kind, n, m in cited(line):
                any_cite = True
                if n not in known[kind]:
                    bad.append(f"{rel}:{i + 1}: {m.group(0)} is not in docs/design.md")
                if f.suffix == ".md" and rel.parts[0] == "docs":
                    tail = line[m.end():m.end() + 2]
                    if not tail.startswith("]("):
                        bad.append(f"{rel}:{i + 1}: {m.group(0)} is not a link to design.md")
        if any_cite and f.suffix != ".md" and "docs/design.md" not in text:
            bad.append(f"{rel}: cites the design but never names docs/design.md")
        if any_cite and f.suffix == ".md" and rel.parts[0] != "docs" \
                and "docs/design.md" not in text:
            bad.append(f"{rel}: cites the design but never names docs/design.md")
    return bad


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    if "--link" in sys.argv:
        link(root)
        return 0
    bad = check(root)
    for b in bad:
        print(b)
    print(f"citations: {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
