#!/usr/bin/env bash
# bench-import.sh compares the throughput of runhcs's Windows layer import
# (internal/wclayer.ImportLayer) with GNU tar extracting the same tar on this machine, and
# prints the ratio (runhcs MB/s / GNU tar MB/s; above 1 means runhcs is faster).
#
# The tar is an OCI Windows layer of about $MB MiB (default 300) of mixed file sizes (70%
# under 16 KiB, 27% 64 KiB-1 MiB, 3% 4-16 MiB) with the Windows PAX records on every entry,
# written by internal/wclayer's TestWriteBenchTar. Both sides read it from the page cache and
# write to the same file system ($WORKDIR, default a folder under /var/tmp); neither syncs.
# runhcs's side also stores the Windows metadata (one xattr per file), GNU tar drops it.
#
# Needs root (the importer writes trusted.* xattrs). Usage: hack/bench-import.sh [runs]
set -euo pipefail

runs=${1:-5}
MB=${MB:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${WORKDIR:-/var/tmp}/bench-import.XXXXXX")
trap 'rm -rf "$work"' EXIT

cd "$root"
go test -c -o "$work/wclayer.test" ./internal/wclayer
WCLAYER_WRITE_BENCH_TAR="$work/mixed.tar" WCLAYER_BENCH_TAR_MB="$MB" \
	"$work/wclayer.test" -test.run '^TestWriteBenchTar$' -test.count=1 >/dev/null
size=$(stat -c %s "$work/mixed.tar")
cat "$work/mixed.tar" >/dev/null # into the page cache for both sides

# Interleave the two sides so that noise from other work on the machine hits both alike, and
# keep the best run of each.
best_tar=0
best_ours=0
for i in $(seq "$runs"); do
	rm -rf "$work/out" && mkdir "$work/out" && sync
	start=$(date +%s%N)
	tar --warning=no-unknown-keyword -xf "$work/mixed.tar" -C "$work/out"
	end=$(date +%s%N)
	mbs=$(awk -v s="$size" -v ns="$((end - start))" 'BEGIN { printf "%.2f", s / 1e6 / (ns / 1e9) }')
	rm -rf "$work/out" && sync
	best_tar=$(awk -v a="$best_tar" -v b="$mbs" 'BEGIN { print (b > a) ? b : a }')

	out=$(WCLAYER_BENCH_TAR="$work/mixed.tar" "$work/wclayer.test" -test.run '^$' \
		-test.bench '^BenchmarkImportFile$' -test.benchtime 1x -test.count=1)
	ours=$(echo "$out" | awk '/^BenchmarkImportFile/ { for (i = 1; i <= NF; i++) if ($i == "MB/s") print $(i-1) }')
	if [ -z "$ours" ]; then
		echo "benchmark gave no MB/s:" >&2
		echo "$out" >&2
		exit 1
	fi
	sync
	best_ours=$(awk -v a="$best_ours" -v b="$ours" 'BEGIN { print (b > a) ? b : a }')
	echo "run $i: runhcs import $ours MB/s, GNU tar $mbs MB/s"
done
ours=$best_ours

echo "tar: $((size / 1000000)) MB; runhcs import: $ours MB/s; GNU tar $(tar --version | head -1 | awk '{print $NF}'): $best_tar MB/s (best of $runs)"
awk -v a="$ours" -v b="$best_tar" 'BEGIN { printf "ratio runhcs/GNU tar: %.2f\n", a / b }'
