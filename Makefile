# gpuops.nvidia — set-up, the lab demo and the test suite. Safe to re-run; fast when nothing
# changed. `make lab` runs the site playbook on the built-in lab; `make test` runs every test.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The suite's main environment runs the newest ansible-core of the supported range, which needs
# Python 3.12 or newer on the controller (tests/lab/find-python finds one, or says how to get it).
MAIN_PYTHON := 3.12
VENV := .venv
BIN := $(VENV)/bin
BUILD := .build
VERSION := $(shell sed -n 's/^version: *//p' galaxy.yml)
TARBALL := $(BUILD)/gpuops-nvidia-$(VERSION).tar.gz
COLLECTIONS := $(BUILD)/collections
# ansible-test wants the collection under ansible_collections/<namespace>/<name>, outside this
# git checkout (inside it, git would hide the ignored copy from ansible-test).
AT_ROOT := $(or $(TMPDIR),/tmp)/gpuops-nvidia-ansible-test/ansible_collections/gpuops/nvidia
comma := ,
FAKE_NVML := tests/lab/fake-nvml/build/libnvidia-ml.so.1
FAKE_NVML_DEB := tests/lab/fake-nvml/build/gpuops-lab-fake-nvml.deb

export CONTAINERS_CONF := $(CURDIR)/tests/lab/containers.conf
# molecule calls ansible-playbook, ansible-config and pytest by name.
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export ANSIBLE_FORCE_COLOR := 0
export PY_COLORS := 0

APT_PACKAGES := podman runc conmon netavark aardvark-dns catatonit containernetworking-plugins \
	fuse-overlayfs slirp4netns uidmap debootstrap gcc make rsync binutils apt-utils gnupg gpgv dpkg-dev \
	containerd e2fsprogs curl xz-utils debian-archive-keyring busybox-static openjdk-17-jre-headless pciutils

COLLECTION_SOURCES := galaxy.yml README.md LICENSE $(shell find meta plugins roles playbooks \
	changelogs -type f -not -path '*/__pycache__/*' 2>/dev/null)

.PHONY: help lab lab-down test deps apt venv fake-nvml images collection docs sanity lint units core-envs core-checks \
	lab-tests lab-parts-tests lab-cluster-tests lane-checks integration molecule clean ansible-test-env apt-repo runtime-binaries go-binaries

help:
	@echo "make lab      run the site playbook on the built-in lab (simulated GPU nodes)"
	@echo "make test     set everything up and run the whole test suite"
	@echo "make lab-down remove the lab's containers"
	@echo "make docs     build the collection's documentation site (.build/docs/build/html)"

## ---- set-up -------------------------------------------------------------------------------
deps: apt venv

apt: $(BUILD)/apt.stamp
$(BUILD)/apt.stamp: Makefile
	@mkdir -p $(BUILD)
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
		| grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "apt: installing $$missing"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi
	@touch $@

venv: $(VENV)/.stamp
$(VENV)/.stamp: requirements.txt
	@$(BIN)/python -c 'import sys; sys.exit(sys.version_info[:2] != ($(subst .,$(comma) ,$(MAIN_PYTHON))))' 2>/dev/null || { \
	  python=$$(tests/lab/find-python $(MAIN_PYTHON)) && rm -rf $(VENV) && $$python -m venv $(VENV); }
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

# The library (for with-gpus and the tests) and its .deb (the lab containers' "driver").
fake-nvml: venv
	$(MAKE) -s -C tests/lab/fake-nvml PYTHON=$(CURDIR)/$(BIN)/python all deb

images: apt
	tests/lab/images/build all

# Real components built from their Go modules (cached outside the checkout, by version): NVIDIA's
# container toolkit for the lab's packages, CRI-O for the runtime configuration checks, and the
# lab cluster's Kubernetes, etcd, kwok, NVIDIA device plugin / GFD, Node Feature Discovery and
# NVIDIA's DRA driver;
# and the lab's own stand-ins (DCGM exporter, CUDA sample vectorAdd).
GO_BINARY_SETS := toolkit-1.17.8 toolkit-1.18.0 crio kubernetes etcd kwok device-plugin nfd dcgm-exporter cuda-vectoradd mig-parted dra-driver
go-binaries:
	tests/lab/go-binaries $(GO_BINARY_SETS)

# GPG-signed apt repositories shaped like NVIDIA's CUDA and container toolkit repositories (the
# toolkit packages carry the real toolkit binaries).
APT_REPO := $(BUILD)/apt-repo
apt-repo: apt go-binaries
	tests/lab/apt-repo/build -q $(APT_REPO)

collection: $(COLLECTIONS)/ansible_collections/gpuops/nvidia/MANIFEST.json
$(COLLECTIONS)/ansible_collections/gpuops/nvidia/MANIFEST.json: $(VENV)/.stamp $(COLLECTION_SOURCES)
	@mkdir -p $(BUILD)
	$(BIN)/ansible-galaxy collection build --force --output-path $(BUILD) >/dev/null
	$(BIN)/ansible-galaxy collection install --offline --force -p $(COLLECTIONS) $(TARBALL) >/dev/null
	@echo "installed gpuops.nvidia $(VERSION) into $(COLLECTIONS)"

# The collection's documentation site, from the modules', plugins' and roles' own docs, as Ansible's
# docs site builds a collection's (antsibull-docs, then Sphinx; any error or warning fails it):
# open .build/docs/build/html/index.html.
# Its links to Ansible's own docs (each module's "common return values", the environment variables
# page, M() and seealso references to ansible.builtin and kubernetes.core) resolve through the
# intersphinx inventories named in the conf.py that sphinx-init writes; Sphinx fetches them from
# docs.python.org, jinja.palletsprojects.com and docs.ansible.com, and where it cannot (offline)
# it reads the local copies that conf.py names as the alternative, ../<name>.inv. Those are
# written here (tests/lab/docs_inventories.py): ansible_devel.inv holds the docs.ansible.com
# targets this site links to (a label=page of Ansible's docs, or a module's FQCN); the others hold
# no target, as the site links to none. A reference to anything not listed still fails the offline build: add it below.
# The build's progress goes to .build/docs/build.log; its warnings and errors (stderr) show here.
docs: collection
	@rm -rf $(BUILD)/docs && mkdir -p $(BUILD)/docs
	cd $(BUILD)/docs && export ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/$(COLLECTIONS) && \
	  $(CURDIR)/$(BIN)/antsibull-docs sphinx-init --use-current --squash-hierarchy --fail-on-error \
	    --title "gpuops.nvidia" --dest-dir . gpuops.nvidia >/dev/null && \
	  $(CURDIR)/$(BIN)/python $(CURDIR)/tests/lab/docs_inventories.py . \
	    common_return_values=reference_appendices/common_return_values.html \
	    ansible_configuration_settings=reference_appendices/config.html \
	    ansible.builtin.apt ansible.builtin.deb822_repository ansible.builtin.reboot \
	    kubernetes.core.k8s kubernetes.core.k8s_drain kubernetes.core.k8s_info && \
	  ./build.sh >build.log
	@echo "the documentation site: $(BUILD)/docs/build/html/index.html"

## ---- the lab ------------------------------------------------------------------------------
# The GPU nodes, the cluster built from Kubernetes' source (the nodes join it before the host
# stages, as on a real cluster), the site playbook, then the lab's stand-in for the Kubernetes
# stages (NFD, device plugin, GFD) until the collection's roles deploy them.
lab: deps fake-nvml images apt-repo collection go-binaries runtime-binaries
	tests/lab/lab up
	tests/lab/kube up
	$(BIN)/ansible-playbook -i inventories/lab playbooks/site.yml

lab-down:
	tests/lab/kube down
	tests/lab/lab down

## ---- tests --------------------------------------------------------------------------------
# Under `make test` a test whose prerequisite is missing fails instead of skipping
# (GPUOPS_REQUIRE_ALL): only a reason a reader sees, like "no GPU", may skip a test.
SETUP := deps core-envs fake-nvml images collection apt-repo go-binaries runtime-binaries
PHASE := tests/lab/phases run
test:
	@tests/lab/phases reset
	@trap 'tests/lab/phases report' EXIT; \
	$(PHASE) set-up $(MAKE) --no-print-directory $(SETUP) && \
	GPUOPS_REQUIRE_ALL=1 $(MAKE) --no-print-directory -j2 --output-sync=target lane-checks lab-cluster-tests

# make test's two lanes, side by side: the checks that need no cluster (sanity, lint, units, the
# lab parts' own tests, the molecule scenarios two at a time, the integration tests) and the lab
# cluster's tests (the longest lane: it starts at once). Separate containers, networks and ports;
# each log kept whole. (The checks' lane runs one thing at a time, -j1: its sub-makes would
# otherwise take the second job slot for sanity and lint side by side, and the cluster's lane,
# the longest, would wait for them - make says it resets the jobserver for them.)
LANE := $(MAKE) --no-print-directory -j1
lane-checks:
	$(LANE) sanity lint units && $(LANE) core-checks && $(LANE) lab-parts-tests && $(LANE) molecule && \
	$(LANE) integration

$(AT_ROOT): FORCE
	@mkdir -p $(AT_ROOT)
	@rsync -a --delete --delete-excluded --exclude '/.venv' --exclude '/.build' --exclude '/.git' \
		--exclude '__pycache__' --exclude '/tests/output' --exclude '.pytest_cache' \
		--exclude '/tests/lab/fake-nvml/build/deb' ./ $(AT_ROOT)/
FORCE:

# ansible-test builds its own virtual environments and first fetches a pip bootstrap script from
# a host the lab cannot reach; tests/lab/ansible-test/get_pip.py stands in for it.
ANSIBLE_TEST_PIP := $(shell sed -n "s/.*pip='\([0-9.]*\)'.*/\1/p" \
	$(VENV)/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py 2>/dev/null | head -1)
ANSIBLE_TEST_GET_PIP := $(HOME)/.ansible/test/cache/get_pip_$(subst .,_,$(ANSIBLE_TEST_PIP)).py

ansible-test-env: $(AT_ROOT) venv
	@mkdir -p $(dir $(ANSIBLE_TEST_GET_PIP))
	@cp tests/lab/ansible-test/get_pip.py $(ANSIBLE_TEST_GET_PIP)

sanity: ansible-test-env
	cd $(AT_ROOT) && $(CURDIR)/$(PHASE) sanity $(CURDIR)/$(BIN)/ansible-test sanity --python $(MAIN_PYTHON) --color no

units: ansible-test-env fake-nvml
	cd $(AT_ROOT) && $(CURDIR)/$(PHASE) units $(CURDIR)/$(BIN)/ansible-test units --python $(MAIN_PYTHON) --color no

lint: core-envs
	$(PHASE) ansible-lint tests/lab/no-warnings $(BIN)/ansible-lint --offline

## ---- the supported ansible-core range -----------------------------------------------------
# The main environment (.venv) runs the newest release of the range on Python 3.12: lint, molecule,
# the integration and the lab's tests run there. Each other release of the range gets an environment
# of its own (.build/core-<release>: ansible-core on the controller Python given after the colon,
# with tests/requirements-core.txt) in which ansible-test sanity and units run as they do in .venv.
# The oldest (meta/runtime.yml's requires_ansible) also gets its `ansible` bundle: the lab's tests
# run the site playbook with it once (a smoke run), and its awx.awx (which the newer bundles no
# longer ship) lets ansible-lint and the syntax checks resolve awx/configure.yml.
OLDEST_CORE := 2.19.14
OLDEST_BUNDLE := 12.3.0
CORE_RELEASES := $(OLDEST_CORE):3.11 2.20.10:3.12
OLDEST_ENV := $(BUILD)/core-$(OLDEST_CORE)
EXTRA_COLLECTIONS := $(BUILD)/extra-collections

core-envs: $(foreach pair,$(CORE_RELEASES),$(BUILD)/core-$(word 1,$(subst :, ,$(pair)))/.stamp) \
	$(EXTRA_COLLECTIONS)/ansible_collections/awx/awx/MANIFEST.json
$(BUILD)/core-%/.stamp: tests/requirements-core.txt
	@rm -rf $(BUILD)/core-$*
	@python=$$(tests/lab/find-python $(word 2,$(subst :, ,$(filter $*:%,$(CORE_RELEASES))))) && \
	  $$python -m venv $(BUILD)/core-$*
	$(BUILD)/core-$*/bin/pip install -q --disable-pip-version-check ansible-core==$* \
	  $(if $(filter $*,$(OLDEST_CORE)),ansible==$(OLDEST_BUNDLE)) -r tests/requirements-core.txt
	@touch $@

$(EXTRA_COLLECTIONS)/ansible_collections/awx/awx/MANIFEST.json: $(OLDEST_ENV)/.stamp
	@rm -rf $(EXTRA_COLLECTIONS) && mkdir -p $(EXTRA_COLLECTIONS)/ansible_collections/awx
	cp -a $(OLDEST_ENV)/lib/python3*/site-packages/ansible_collections/awx/awx $(EXTRA_COLLECTIONS)/ansible_collections/awx/
	@touch $@

# each release's ansible-test fetches the pip bootstrap its own version names (see ANSIBLE_TEST_GET_PIP)
core-checks: core-envs ansible-test-env fake-nvml
	@failed=; for pair in $(CORE_RELEASES); do \
	  release=$${pair%%:*}; python=$${pair##*:}; \
	  env=$(CURDIR)/$(BUILD)/core-$$release; \
	  pip=$$(sed -n "s/.*pip='\([0-9.]*\)'.*/\1/p" $$env/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py | head -1); \
	  [ -n "$$pip" ] || { echo "core-checks: ansible-test $$release names no pip version (python_requirements.py changed?)"; exit 1; }; \
	  cp tests/lab/ansible-test/get_pip.py $(HOME)/.ansible/test/cache/get_pip_$$(echo $$pip | tr . _).py || exit 1; \
	  (cd $(AT_ROOT) && PATH=$$env/bin:$$PATH $(CURDIR)/$(PHASE) "sanity (ansible-core $$release)" \
	    ansible-test sanity --python $$python --color no) || failed="$$failed sanity-$$release"; \
	  (cd $(AT_ROOT) && PATH=$$env/bin:$$PATH $(CURDIR)/$(PHASE) "units (ansible-core $$release)" \
	    ansible-test units --python $$python --color no) || failed="$$failed units-$$release"; \
	done; \
	if [ -n "$$failed" ]; then echo "core-checks failed:$$failed"; exit 1; fi

lab-tests: lab-parts-tests lab-cluster-tests

lab-parts-tests: fake-nvml apt images
	$(PHASE) "lab: fake NVML, apt repository" $(BIN)/pytest -q -p no:cacheprovider tests/lab/fake-nvml/tests tests/lab/apt-repo

lab-cluster-tests: fake-nvml apt images go-binaries
	$(PHASE) "lab: cluster (kubelab)" $(BIN)/pytest -q -p no:cacheprovider --durations=15 tests/lab/kubelab/tests

molecule: images fake-nvml collection apt-repo
	$(PHASE) "molecule (all scenarios, 2 at a time)" tests/lab/run-molecule -j 2

# containerd 1.7 / 2.x and dockerd 20.10 / 26 from other Debian releases, for the runtimes' own
# configuration checks
runtime-binaries: apt
	tests/lab/runtime-binaries $(BUILD)/runtimes

integration: fake-nvml collection runtime-binaries go-binaries apt-repo
	GPUOPS_CRIO=$$(tests/lab/go-binaries --dir crio)/crio \
	GPUOPS_RUNTIME_BINARIES=$(CURDIR)/$(BUILD)/runtimes $(PHASE) integration \
	$(BIN)/pytest -q -p no:cacheprovider --durations=10 tests/integration

clean:
	rm -rf $(BUILD)
