# hack/wine/wine.mk: the Windows build's tests under Wine (included by the Makefile).

.PHONY: test-windows

## test-windows: windows/amd64 tests of every package with Windows code, run under Wine (installs wine64 and mingw-w64 if missing)
test-windows:
	bash hack/wine/test.sh
