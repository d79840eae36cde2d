#!/bin/sh
# Downloads the validation set: every file of labels.toml at its recorded commit, into DIR.
#
#   crates/idem-lint/validation/fetch.sh DIR
#
# Needs git and network access to the repositories' host (IDEM_LINT_GIT_BASE, default
# https://github.com). Each repository is cloned once, without checkout, under DIR/.repos.
set -eu
dir=${1:?usage: fetch.sh DIR}
base=${IDEM_LINT_GIT_BASE:-https://github.com}
labels=$(dirname "$0")/labels.toml
mkdir -p "$dir/.repos"
awk -F' = ' '
  /^repo = /   { gsub(/"/, "", $2); repo = $2 }
  /^path = /   { sub(/^"/, "", $2); sub(/"$/, "", $2); path = $2 }
  /^commit = / { gsub(/"/, "", $2); commit = $2 }
  /^local = /  { sub(/^"/, "", $2); sub(/"$/, "", $2); print repo "\t" path "\t" commit "\t" $2 }
' "$labels" | while IFS='	' read -r repo path commit local; do
  clone="$dir/.repos/$(echo "$repo" | tr / +)"
  if [ ! -d "$clone" ]; then
    git clone --quiet --filter=blob:none --no-checkout "$base/$repo.git" "$clone"
  fi
  git -C "$clone" cat-file -e "$commit^{commit}" 2>/dev/null || git -C "$clone" fetch --quiet origin "$commit"
  git -C "$clone" show "$commit:$path" > "$dir/$local"
  echo "$local"
done
