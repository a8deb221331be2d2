#!/usr/bin/env python3
"""Fails when a relative Markdown link of the README or of docs/ leads nowhere.

Every `[text](target)` of README.md, docs/*.md and fuzz/syzkaller/README.md whose target is
not a URL must name a file or directory that exists, relative to the document; a `#fragment`
must be a heading of the document it names, as GitHub makes anchors of headings (lower case,
punctuation dropped, spaces as hyphens).
usage: scripts/check-links.py [ROOT]
"""

import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
DOCS = ["README.md", "docs/*.md", "fuzz/syzkaller/README.md"]
# A link's target: up to the closing parenthesis, allowing one pair inside.
LINK = re.compile(r"\]\(((?:[^()\s]|\([^()\s]*\))+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchors(path):
    """The anchors GitHub gives the headings of `path`."""
    out, seen = set(), {}
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", path.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", m[1].lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def main():
    bad = []
    docs = sorted({p for pattern in DOCS for p in ROOT.glob(pattern)})
    for doc in docs:
        text = FENCE.sub(lambda m: "\n" * m[0].count("\n"), doc.read_text())
        for m in LINK.finditer(text):
            target = m[1]
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue
            where = f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            file, _, fragment = target.partition("#")
            dest = (doc.parent / file).resolve() if file else doc
            if not dest.exists():
                bad.append(f"{where}: {target}: no such file")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                bad.append(f"{where}: {target}: no such heading in {dest.relative_to(ROOT)}")
    for b in bad:
        print(b)
    if bad:
        sys.exit(f"check-links: {len(bad)} links lead nowhere")
    print(f"check-links: the relative links of {len(docs)} documents resolve")


if __name__ == "__main__":
    main()
