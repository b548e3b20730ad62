#!/usr/bin/env bash
# make mutate: mutation testing of every package linked into the operator
# and of the kit's public packages (each folder with the ones under it) with their unit tests
# alone (WIDGET_UNIT_ONLY=1 makes the tests that need a control plane skip).
# Prints a score per package, then every mutant that no test killed.
# MUTATE_PKGS picks the packages; the tool is pinned in this folder's go.mod.
# MUTATE_OUT, a folder, keeps each package's full gremlins output there as
# PKG.out (default: a temporary folder, removed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."
pkgs=${MUTATE_PKGS:-"queue watch reconcile widget k8sapi metrics events manager internal/operator cmd/widget-operator"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${MUTATE_OUT:-$work}
mkdir -p "$out"
(cd hack/mutate && GOTOOLCHAIN=local go build -o "$work/gremlins" github.com/go-gremlins/gremlins/cmd/gremlins)
export WIDGET_UNIT_ONLY=1
# gremlins gives each mutant's tests a timeout of a coefficient times its
# first, coverage run of them. That run is never a cached result
# (-count=1), and the coefficient is 3, or more for a package whose tests
# take less than a third of MUTATE_MIN_TIMEOUT seconds (default 20) when
# built: a mutant's run also compiles the package, which then takes
# longer than the tests (queue's run in 0.6 s, its mutants in 2 to 5).
export GOFLAGS="$(go env GOFLAGS) -count=1"
for p in $pkgs; do
	echo "mutate: $p" >&2
	start=$(date +%s%N)
	go test -cover "./$p/..." >/dev/null 2>&1 || true
	ms=$(( ($(date +%s%N) - start) / 1000000 + 1 ))
	coef=$(( (${MUTATE_MIN_TIMEOUT:-20} * 1000 + ms - 1) / ms ))
	if [ "$coef" -lt 3 ]; then coef=3; fi
	# gremlins runs a mutant's tests in the package of the nearest folder
	# named like the file's package; a main package's folder is not
	# named main, so gremlins would run the module root's tests. It runs
	# on a copy of the module where that folder is renamed main.
	dir=. target=$p
	if [ "$(go list -f '{{.Name}}' "./$p")" = main ]; then
		dir=$work/module target=$(dirname "$p")/main
		rm -rf "$dir" && mkdir -p "$dir" && tar -c --exclude=./.git --exclude=./bin . | tar -x -C "$dir"
		mv "$dir/$p" "$dir/$target"
	fi
	(cd "$dir" && "$work/gremlins" unleash --workers "${MUTATE_WORKERS:-0}" --timeout-coefficient "$coef" "./$target") >"$out/${p//\//_}.out" 2>&1 || true
done
printf '\n%-20s %7s %6s %12s %9s %9s\n' package killed lived not-covered efficacy strict
for p in $pkgs; do
	line=$(grep -E '^Killed: [0-9]+, Lived: [0-9]+, Not covered: [0-9]+' "$out/${p//\//_}.out" || true)
	if [ -z "$line" ]; then printf '%-20s failed:\n' "$p"; tail -5 "$out/${p//\//_}.out"; continue; fi
	read -r k l n <<<"$(echo "$line" | sed -E 's/Killed: ([0-9]+), Lived: ([0-9]+), Not covered: ([0-9]+).*/\1 \2 \3/')"
	awk -v p="$p" -v k="$k" -v l="$l" -v n="$n" 'BEGIN {
		e = (k + l) ? 100 * k / (k + l) : 100; s = (k + l + n) ? 100 * k / (k + l + n) : 100
		printf "%-20s %7d %6d %12d %8.1f%% %8.1f%%\n", p, k, l, n, e, s }'
done
echo
echo "efficacy: killed / (killed + lived); strict: killed / all mutants, not covered included."
echo "Survivors (LIVED: a test runs the line but none fails; NOT COVERED: no unit test runs it):"
for p in $pkgs; do
	grep -E '^ *(LIVED|NOT COVERED) ' "$out/${p//\//_}.out" | sed -E "s|^ *|  $p/|" || true
done
