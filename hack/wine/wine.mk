# hack/wine/wine.mk: the Windows build's tests under Wine (included by the Makefile).

.PHONY: test-windows test-wine-containerd

## test-windows: windows/amd64 tests of every package with Windows code, run under Wine (installs wine64 and mingw-w64 if missing)
test-windows:
	bash hack/wine/test.sh

## test-wine-containerd: containerd 2.x's and 1.7's Windows builds under Wine with the Windows-built shim, built-in windows snapshotter and this project's as proxy plugin: ctr.exe run must print the workload's line (root; hack/wine/containerd.sh)
test-wine-containerd:
	bash hack/tools.sh containerd-windows
	bash hack/tools.sh containerd1.7-windows
	@set -e; for v in 2 1.7; do for m in windows wcow; do \
		echo "test-wine-containerd: $$m, containerd $$v"; \
		timeout 600 bash hack/wine/containerd.sh $$m $$v; \
	done; done
