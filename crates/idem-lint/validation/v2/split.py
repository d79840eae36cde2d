#!/usr/bin/env python3
"""Splits the labelled cases into a train and a test half, by repository.

    python3 crates/idem-lint/validation/v2/split.py cases.toml [more.toml …] > split.toml
    python3 crates/idem-lint/validation/v2/split.py --keep cases.toml new.toml > split.toml
    python3 crates/idem-lint/validation/v2/split.py --aim 3 cases.toml > split.toml

--aim N sets the test positives aimed at per check (five by default: issue 27; issue 28 asks
for three per check in each language group, so its groups are split one file at a time).

With --keep, the cases of the kept file (already split) keep their half, and only the
repositories of the new files are assigned, counting the kept test positives: cases added
later never move a repository the rules were tuned on into the test half, or back.

A repository is never in both halves. Repositories are taken in a fixed pseudo-random order
(sha256 of the name) and each goes to the test half while it brings a positive of a check whose
test positives are still short of the aim (five, or half the check's positives when it has fewer
than ten) and the test half holds under half of the cases; every other repository goes to train.
Stratified by check this way and, within it, by language (the order interleaves the languages).
The output is every case with its `half`, sorted by half, repository, path and line range.
"""
import collections
import hashlib
import sys
import tomllib


def load(paths):
    cases = []
    for path in paths:
        with open(path, "rb") as f:
            cases.extend(tomllib.load(f)["case"])
    return cases


def split(cases, kept=None, aim_per_check=5):
    kept = kept or {}
    by_repo = collections.defaultdict(list)
    for case in cases:
        by_repo[case["repo"]].append(case)
    positives = collections.Counter(c["check"] for c in cases if c["positive"])
    top = aim_per_check
    aim = {check: min(top, n // 2) if n < 2 * top else top for check, n in positives.items()}
    # Interleave the languages: each language's repositories in hash order, round robin.
    by_lang = collections.defaultdict(list)
    for repo, rs in by_repo.items():
        lang = collections.Counter(c["language"] for c in rs).most_common(1)[0][0]
        by_lang[lang].append(repo)
    queues = [sorted(rs, key=lambda r: hashlib.sha256(r.encode()).hexdigest()) for _, rs in sorted(by_lang.items())]
    order = []
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    test_pos = collections.Counter(
        c["check"] for c in cases if c["positive"] and kept.get(c["repo"]) == "test")
    test_cases = sum(1 for c in cases if kept.get(c["repo"]) == "test")
    half = dict(kept)
    for repo in order:
        if repo in kept:
            continue
        brings = collections.Counter(c["check"] for c in by_repo[repo] if c["positive"])
        needed = any(test_pos[check] < aim[check] for check in brings)
        if needed and test_cases + len(by_repo[repo]) <= len(cases) // 2:
            half[repo] = "test"
            test_pos.update(brings)
            test_cases += len(by_repo[repo])
        else:
            half[repo] = "train"
    return half


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(v)


KEYS = ["half", "repo", "commit", "path", "language", "check", "lines", "positive", "line", "also", "note"]


def main():
    args = sys.argv[1:]
    aim = 5
    if args[:1] == ["--aim"]:
        aim = int(args[1])
        args = args[2:]
    kept = {}
    if args[:1] == ["--keep"]:
        with open(args[1], "rb") as f:
            old = tomllib.load(f)["case"]
        kept = {c["repo"]: c["half"] for c in old}
        for c in old:
            c.pop("half")
        cases = old + load(args[2:])
        if any(c["repo"] in kept for c in load(args[2:])):
            sys.exit("a new case is in a repository already split")
    else:
        cases = load(args)
    half = split(cases, kept, aim)
    for case in cases:
        case["half"] = half[case["repo"]]
    cases.sort(key=lambda c: (c["half"], c["repo"], c["path"], c["lines"], c["check"]))
    print("# idem-lint validation set: labelled cases from public repositories.")
    print("# Labelled from the check doc pages alone (docs/rules/*.md) by labellers who had not read")
    print("# the rules' code; split by repository with split.py before any rule changed. The code")
    print("# itself is not kept here: v2/fetch.py downloads it. See README.md beside this file.")
    for case in cases:
        print("\n[[case]]")
        for key in KEYS:
            if key in case:
                print(f"{key} = {toml_value(case[key])}")


if __name__ == "__main__":
    main()
