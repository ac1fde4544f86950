"""Judge the sanitizer logs of a `make sanitize` run (one file per process, ASan's log_path).

Fails (exit 1, printing each report) on any AddressSanitizer or UndefinedBehaviorSanitizer error,
and on any LeakSanitizer leak whose allocation stack passes through torchlean's native code
(native/ sources or libtorchlean): a leak of torchlean's own allocations. The leaks the Python
interpreter and other extensions keep at exit by design (their stacks hold no torchlean frame)
are counted and reported in one line, not judged.

usage: python3 tools/sanitizer_logs.py LOG_DIR
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

OURS = re.compile(r"\bnative/|libtorchlean")
BLOCK = re.compile(r"\n(?=(?:Direct|Indirect) leak of )")


def judge(text: str) -> tuple[list[str], list[str], int]:
    """(errors, our leaks, other leaks) of one process's log."""
    errors, ours, other = [], [], 0
    head, _, leaks = text.partition("ERROR: LeakSanitizer: detected memory leaks")
    if re.search(r"ERROR: AddressSanitizer|runtime error:", head):
        errors.append(head.strip())
    for block in BLOCK.split(leaks)[1:]:
        block = block.split("\nSUMMARY:")[0].strip()
        if OURS.search(block):
            ours.append(block)
        else:
            other += 1
    return errors, ours, other


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    logs = sorted(Path(argv[1]).glob("*.*"))
    bad, other = 0, 0
    for log in logs:
        errors, ours, n = judge(log.read_text(errors="replace"))
        other += n
        for report in errors + ours:
            bad += 1
            print(f"--- {log}\n{report}\n")
    print(f"sanitizer logs: {len(logs)} processes, {bad} torchlean finding(s), {other} leak "
          "report(s) of the interpreter and other libraries (not torchlean's, not judged)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
