#!/usr/bin/env python3
"""Joins the labellers' files of one language group into one list, before the split.

    python3 crates/idem-lint/validation/v5/merge.py OUT.toml LABELS.toml [LABELS.toml …]

Two labellers working in parallel sometimes labelled the same file for the same check: where
they agree the first case is kept (the agreement is counted and printed); where they disagree on
overlapping lines both are dropped (printed), and on different places of the file both are kept. A path labelled at two commits of one repository keeps only the
first commit's cases, because the fetch script lays one commit's files out per repository.
"""
import os
import sys
import tomllib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "v2"))
from split import toml_value  # noqa: E402

KEYS = ["repo", "commit", "path", "language", "check", "lines", "positive", "also", "note"]


def main():
    out, inputs = sys.argv[1], sys.argv[2:]
    cases = []
    for path in inputs:
        with open(path, "rb") as f:
            cases.extend(tomllib.load(f)["case"])
    kept, seen, commits = [], {}, {}
    agreed = 0
    for case in cases:
        file_key = (case["repo"], case["path"])
        if commits.setdefault(file_key, case["commit"]) != case["commit"]:
            print(f"dropped (second commit of a path): {case['repo']} {case['path']} {case['check']}", file=sys.stderr)
            continue
        key = (case["repo"], case["path"], case["check"])
        other = seen.get(key)
        if other is None:
            seen[key] = case
            kept.append(case)
        elif other["positive"] == case["positive"] and set(range(other["lines"][0], other["lines"][1] + 1)) & set(range(case["lines"][0], case["lines"][1] + 1)):
            agreed += 1
        elif other["positive"] == case["positive"]:
            kept.append(case)
        elif not set(range(other["lines"][0], other["lines"][1] + 1)) & set(range(case["lines"][0], case["lines"][1] + 1)):
            kept.append(case)  # another place of the file, labelled the other way
        else:
            print(f"two labels of one range, both dropped: {case['repo']} {case['path']} {case['check']}", file=sys.stderr)
            kept.remove(other)
    print(f"{len(kept)} cases kept, {agreed} labelled twice alike", file=sys.stderr)
    with open(out, "w") as f:
        for case in kept:
            f.write("\n[[case]]\n")
            for key in KEYS:
                if key in case:
                    f.write(f"{key} = {toml_value(case[key])}\n")


if __name__ == "__main__":
    main()
