#!/usr/bin/env python3
"""Downloads the files of the validation set v2 at their recorded commits.

    python3 crates/idem-lint/validation/v2/fetch.py HALF DIR      # HALF: train or test

Writes each case's file and the files it calls into (`also`) to DIR/<owner>+<name>/<path>, so
that a repository's files sit together as in the repository (call following needs the helper
beside the handler). Fetch only the train half while tuning rules: the test half is for the
one final run. Needs git and either network access to the host (IDEM_LINT_GIT_BASE, default
https://github.com; each repository is cloned once, bare, under DIR/.repos) or
IDEM_LINT_MIRROR: a folder of bare snapshots laid out as `<owner>+<name>/repo` (as the
workplace's `fetch` tool leaves them under /work/.mirror), read in place.
"""
import os
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in ("train", "test"):
        sys.exit("usage: fetch.py train|test DIR [CASES]   (CASES: default cases.toml beside this script; v3's is ../v3/cases.toml)")
    half, out = sys.argv[1], sys.argv[2]
    cases_file = sys.argv[3] if len(sys.argv) == 4 else os.path.join(HERE, "cases.toml")
    base = os.environ.get("IDEM_LINT_GIT_BASE", "https://github.com")
    mirror = os.environ.get("IDEM_LINT_MIRROR")
    with open(cases_file, "rb") as f:
        cases = [c for c in tomllib.load(f)["case"] if c["half"] == half]
    wanted = sorted({(c["repo"], c["commit"], p) for c in cases for p in [c["path"], *c.get("also", [])]})
    os.makedirs(os.path.join(out, ".repos"), exist_ok=True)
    for repo, commit, path in wanted:
        local = repo.replace("/", "+")
        clone = os.path.join(out, ".repos", local)
        if mirror:
            clone = os.path.join(mirror, local, "repo")
            # Some snapshots arrive with a work tree: their git directory is inside.
            if os.path.isdir(os.path.join(clone, ".git")):
                clone = os.path.join(clone, ".git")
        elif not os.path.isdir(clone):
            subprocess.run(["git", "clone", "--quiet", "--bare", "--filter=blob:none",
                            f"{base}/{repo}.git", clone], check=True)
        have = subprocess.run(["git", "--git-dir", clone, "cat-file", "-e", f"{commit}^{{commit}}"],
                              capture_output=True).returncode == 0
        if not have and mirror:
            # A snapshot cannot be fetched into: a repository the store has no snapshot of,
            # or one without the commit, is reported and left out (its cases count as missed).
            print(f"missing: {repo} {commit[:12]} (no snapshot with that commit in {mirror})", file=sys.stderr)
            continue
        if not have:
            subprocess.run(["git", "--git-dir", clone, "fetch", "--quiet", "origin", commit], check=True)
        blob = subprocess.run(["git", "--git-dir", clone, "show", f"{commit}:{path}"], capture_output=True)
        if blob.returncode != 0:
            print(f"missing: {repo} {commit[:12]} {path}", file=sys.stderr)
            continue
        target = os.path.join(out, local, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(blob.stdout)
        print(os.path.join(local, path))


if __name__ == "__main__":
    main()
