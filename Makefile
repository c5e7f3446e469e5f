# runhcs — see README.md and CONTRIBUTING.md. Every target is a thin wrapper over go or a hack/
# script, so the same commands work without make.

GO ?= go
BIN := bin
COMMANDS := containerd-shim-runhcs-v1 containerd-wcow-snapshotter hcsemu shimdiag
E2E_TIMEOUT ?= 30m
# Packages with unit tests: everything but the end-to-end suites (test/winnode's runs in make
# test-winnode, test/k8s's in make test-cluster); the shared test harness (test/harness) and its
# unit tests are in. test/cluster's end-to-end test needs the cluster's binaries and runs in make
# test-cluster (hack/cluster.sh test); its unit tests run here.
UNIT_PKGS = $(shell $(GO) list ./... | grep -vE '/test/(e2e|soak|winnode|k8s|cluster)$$')

.PHONY: all build test fuzz e2e e2e-2 e2e-1.7 soak test-winnode test-winnode-2 test-winnode-1.7 test-winnode-2-shim test-winnode-kubelet test-cluster demo lint proto proto-check cross tools deps check clean

all: build

## build: bin/containerd-shim-runhcs-v1, bin/containerd-wcow-snapshotter and bin/hcsemu for this machine
build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(COMMANDS))

## test: unit tests with the race detector
test:
	$(GO) test -race -count=1 -timeout 15m $(UNIT_PKGS)
	$(GO) test -race -count=1 -skip 'TestDownAfterCrash|TestDownAfterNodeCrash' ./test/cluster

## fuzz: every fuzz target for a bounded time (RUNHCS_FUZZTIME seconds each, default 20; root)
fuzz:
	bash hack/fuzz.sh

## e2e: the end-to-end suites against containerd 2.x and 1.7 (root)
e2e: e2e-2 e2e-1.7

e2e-2 e2e-1.7: e2e-%: build
	bash hack/tools.sh $(if $(filter 1.7,$*),containerd1.7,containerd)
	RUNHCS_BIN=$(CURDIR)/$(BIN) RUNHCS_E2E_CONTAINERD=$* $(GO) test -count=1 -timeout $(E2E_TIMEOUT) ./test/e2e/...

## soak: the soak and fault suite against containerd 2.x and 1.7, then the shim sandboxer's soak on an emulated node, CI variant (root;
## RUNHCS_SOAK=long for the long one, see hack/soak.sh)
soak:
	bash hack/soak.sh

## test-winnode: the CRI suite (test/cri, kubelet's CRI client) against an emulated Windows node, on containerd 2.4.2's and 1.7.35's Windows builds under Wine (root; hack/winnode.sh test); test-winnode-2 / test-winnode-1.7 for one
# Both versions run even if the first fails. A fresh root per run and version
# (RUNHCS_WINNODE_ROOT/containerd-<version> to choose them): `test` takes down whatever node it
# finds at its root first, so two runs sharing one would break each other.
test-winnode:
	@rc=0; for v in 2 1.7; do $(MAKE) --no-print-directory test-winnode-$$v || rc=1; done; exit $$rc

## test-winnode-2-shim: the same on containerd 2.4.2 with runhcs-wcow-process's pods run through the shim's sandbox API (--sandboxer shim, docs/sandbox-api.md)
test-winnode-2-shim:
	root="$${RUNHCS_WINNODE_ROOT:+$${RUNHCS_WINNODE_ROOT}/containerd-2-shim}"; \
	bash hack/winnode.sh test --containerd 2 --sandboxer shim --root "$${root:-$$(mktemp -d /tmp/runhcs-winnode-test.XXXXXX)}"

test-winnode-2 test-winnode-1.7: test-winnode-%:
	root="$${RUNHCS_WINNODE_ROOT:+$${RUNHCS_WINNODE_ROOT}/containerd-$*}"; \
	bash hack/winnode.sh test --containerd $* --root "$${root:-$$(mktemp -d /tmp/runhcs-winnode-test.XXXXXX)}"

## test-cluster: the Kubernetes suite (test/k8s) against a fresh cluster of two emulated Windows nodes, on containerd 2.4.2, kube-proxy a HostProcess DaemonSet (root; hack/cluster.sh test; RUNHCS_CLUSTER_CONTAINERD=1.7 for 1.7.35, RUNHCS_CLUSTER_WINDOWS_NODES=1 for one node, RUNHCS_CLUSTER_KUBE_PROXY=process for kube-proxy as a node service)
# A fresh root per run (RUNHCS_CLUSTER_ROOT to choose it). Two nodes by default: the tests across
# nodes run only there, and the second node adds about a minute (docs/cluster.md, "Two nodes").
test-cluster:
	bash hack/cluster.sh test --containerd $${RUNHCS_CLUSTER_CONTAINERD:-2} --windows-nodes $${RUNHCS_CLUSTER_WINDOWS_NODES:-2} --kube-proxy $${RUNHCS_CLUSTER_KUBE_PROXY:-daemonset} --root "$${RUNHCS_CLUSTER_ROOT:-$$(mktemp -d /tmp/runhcs-cluster-test.XXXXXX)}"

## test-winnode-kubelet: the pinned kubelet.exe standalone in an emulated Windows node runs a static pod and reports the node's figures (root; hack/winnode.sh test-kubelet; KUBELET_EXE=path/to/kubelet.exe for another build)
test-winnode-kubelet:
	bash hack/winnode.sh test-kubelet --root "$$(mktemp -d /tmp/runhcs-winnode-kubelet.XXXXXX)" $(KUBELET_EXE)

## demo: the README's first command
demo:
	bash hack/demo.sh

## lint: gofmt, go vet (linux and windows), staticcheck, shellcheck, the docs' links (hack/doccheck)
lint:
	bash hack/lint.sh

## proto: regenerate protocols/**/*.pb.go
proto:
	bash hack/proto.sh

proto-check:
	bash hack/proto.sh --check

## cross: Windows builds of every command and of the test workload, amd64 and arm64, into bin/windows_<arch>/
## (not hcsemu: it is Linux only, its package has a linux build tag)
cross:
	GOOS=windows GOARCH=amd64 $(GO) build -o $(BIN)/windows_amd64/ ./cmd/... ./test/workload
	GOOS=windows GOARCH=arm64 $(GO) build -o $(BIN)/windows_arm64/ ./cmd/... ./test/workload

## tools: build the pinned tools (protoc plugins, staticcheck, containerd 2.x and 1.7)
tools:
	bash hack/tools.sh all

## deps: install Debian packages and build the pinned tools
deps:
	bash hack/deps.sh

## check: everything CI runs (the README's second command)
check:
	bash hack/check.sh

clean:
	rm -rf $(BIN)

include hack/wine/wine.mk
