#!/bin/sh
# usage: benchmarks/heldout_29/run.sh REPO ENTRY...   (runs inside /tmp/repos/REPO; ALL and default selections)
repo=$1; shift
cd /tmp/repos/$repo || exit 2
for e in "$@"; do
  echo "## $repo $e  [--select ALL]"
  ${DISTLINT:-distlint} check --no-cache --select ALL --format concise "$e" 2>&1 | grep -v '^Found\|^$'
  echo "## $repo $e  [default]"
  ${DISTLINT:-distlint} check --no-cache --format concise "$e" 2>&1 | grep -v '^$'
done
