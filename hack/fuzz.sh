#!/usr/bin/env bash
# hack/fuzz.sh runs every fuzz target of the module (each func FuzzX in a _test.go file) for a
# bounded time, one after the other, and says how many inputs each tried.
#
#   hack/fuzz.sh [SECONDS]     default: $RUNHCS_FUZZTIME, else 20 (CI); e.g. 600 for a long run
#
# Minimization of each new interesting input is bounded to 200 runs of the target
# (-fuzzminimizetime 200x; RUNHCS_FUZZ_MINIMIZE overrides). Go's default is 60 s per input, and
# FuzzImport (a few ms per run: it writes a layer to disk) spent the whole CI window minimizing
# its first interesting input: its status line stopped at "execs: 15" right after the baseline
# and only showed "hung or terminated unexpectedly while minimizing" when its worker was killed.
# Without coverage guidance no input is "interesting", so nothing was minimized and it ran at
# ~500 inputs/s, which is what made the stall look like an instrumentation problem. A crash
# found is still minimized, within the same bound.
#
# The fuzzing runs on Go 1.27.3 (GOTOOLCHAIN; RUNHCS_FUZZ_TOOLCHAIN overrides, "local" for the
# machine's Go), which the go command fetches once from the module proxy. Go 1.26's fuzz
# coordinator can fail a target that found nothing with a bare "context deadline exceeded" at
# the end of -fuzztime when the machine is loaded: it compares the child context's error, not
# yet cancelled, with the parent's (golang/go#75804, fixed in Go 1.27). It failed this
# project's CI once that way (FuzzDecodeOptions, 20.11 s, no input written).
#
# Targets that mount or set trusted.* xattrs need root (FuzzImport); CI runs as root. A crash
# fails the run, and Go writes the input that crashed under the target's
# testdata/fuzz/<FuzzName>/: commit it with the fix, so that every later `go test` replays it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
seconds="${1:-${RUNHCS_FUZZTIME:-20}}"

mapfile -t targets < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Z][A-Za-z0-9_]*\(' internal cmd test |
	while read -r f; do
		grep -oE '^func Fuzz[A-Za-z0-9_]*' "${f}" | sed "s|^func ||; s|^|./$(dirname "${f}") |"
	done | sort)
if [[ ${#targets[@]} -eq 0 ]]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi

failed=()
ran=0
for t in "${targets[@]}"; do
	pkg="${t% *}" name="${t#* }"
	echo "fuzz: ${name} in ${pkg} for ${seconds}s" >&2
	ran=$((ran + 1))
	log="$(mktemp)"
	if GOTOOLCHAIN="${RUNHCS_FUZZ_TOOLCHAIN:-go1.27.3}" go test -run '^$' -fuzz "^${name}\$" -fuzztime "${seconds}s" -fuzzminimizetime "${RUNHCS_FUZZ_MINIMIZE:-200x}" "${pkg}" >"${log}" 2>&1; then
		# The last progress line says how many inputs were tried ("fuzz: elapsed: …, execs: N …").
		grep -E '^fuzz: elapsed' "${log}" | tail -1 | sed "s|^|fuzz: ${name}: |" >&2 || true
	else
		cat "${log}" >&2
		failed+=("${name}")
	fi
	rm -f "${log}"
done
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "fuzz: FAILED: ${failed[*]} (the crashing inputs are under testdata/fuzz/ of their packages)" >&2
	exit 1
fi
echo "fuzz: ${ran} of ${#targets[@]} targets, ${seconds}s each, no crash" >&2
