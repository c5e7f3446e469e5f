#!/usr/bin/env bash
# hack/lint.sh checks formatting (gofmt), runs go vet for Linux and Windows (amd64),
# staticcheck (pinned in tools/lint) for Linux and Windows, shellcheck (the Debian package)
# on every shell script, following the files they source (-x), and hack/doccheck: every relative
# link and #anchor in README.md, CONTRIBUTING.md and docs/ resolves.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
status=0

mapfile -t gofiles < <(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')
unformatted="$(gofmt -l "${gofiles[@]}")"
if [[ -n "${unformatted}" ]]; then
	echo "lint: not gofmt'ed (run gofmt -w):" >&2
	echo "${unformatted}" >&2
	status=1
fi

# windows/arm64 is not vetted: no file is arm64-only, so it would vet windows/amd64's code again
# (compiling every test dependency, client-go among them, once more on a fresh machine); make
# cross builds it.
for target in linux/amd64 windows/amd64; do
	echo "lint: go vet ${target}" >&2
	GOOS="${target%/*}" GOARCH="${target#*/}" go vet ./... || status=1
done

echo "lint: documentation links (hack/doccheck)" >&2
go run ./hack/doccheck || status=1

echo "lint: shellcheck" >&2
if command -v shellcheck >/dev/null; then
	mapfile -t scripts < <(git ls-files -co --exclude-standard '*.sh' 2>/dev/null || find . -name '*.sh' -not -path './bin/*')
	shellcheck -x "${scripts[@]}" || status=1
else
	echo "lint: shellcheck is not installed (Debian package shellcheck; hack/deps.sh installs it)" >&2
	status=1
fi

bash "${ROOT}/hack/tools.sh" lint
STATICCHECK="$(bash "${ROOT}/hack/tools.sh" path staticcheck)"
# One run per OS, merged: code used only in _linux.go files is not "unused" because the Windows
# build does not see its callers (staticcheck's documented -merge workflow).
results="$(mktemp -d)"
trap 'rm -rf "${results}"' EXIT
for goos in linux windows; do
	echo "lint: staticcheck ${goos}" >&2
	GOOS="${goos}" "${STATICCHECK}" -f binary ./... >"${results}/${goos}.bin" || status=1
done
"${STATICCHECK}" -merge "${results}/linux.bin" "${results}/windows.bin" || status=1
exit ${status}
