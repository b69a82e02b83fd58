# The two commands a newcomer needs: `make sandbox` and `make test`.
# Everything they need is installed into .venv from pyproject.toml; nothing by hand.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: sandbox test lint typecheck contracts docs pytest bench clean release-manifests kube-binaries

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-install whenever pyproject.toml changes.
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

$(VENV)/.installed-server: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[server,real]'
	touch $@

sandbox: $(VENV)/.installed-server
	$(BIN)/kamaji-broker sandbox $(ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy
	$(BIN)/mypy tests

contracts: $(VENV)/.installed-test
	$(BIN)/lint-imports

# The real binaries built from the Go modules gomod/ pins: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl into ~/.cache/kamaji-broker/kube/<versions>/,
# the Kamaji operator, kwok and Kamaji's CRDs into ~/.cache/kamaji-broker/kamaji/<versions>/,
# Cluster API's manager, clusterctl and manifests into ~/.cache/kamaji-broker/capi/<version>/,
# linkshaper (a site's link delayed, lossy or cut) into ~/.cache/kamaji-broker/net/<hash>/;
# what is there (or in $$KUBEBUILDER_ASSETS) is kept. Minutes the first time, nothing after.
kube-binaries:
	bash gomod/build.sh all

# pytest exits 5 when it collects no test: that fails this target (and CI) loudly.
pytest: $(VENV)/.installed-test kube-binaries
	$(BIN)/pytest $(PYTEST_ARGS)

# The docs site from docs/ into out/site/: strict, so a broken link, a missing anchor or a page
# left out of mkdocs.yml's navigation fails.
docs: $(VENV)/.installed-test
	$(BIN)/mkdocs build --strict --quiet

test: lint typecheck contracts docs pytest

# A clusterctl provider repository in out/release/control-plane-kamaji-broker/v<version>/
# (metadata.yaml, control-plane-components.yaml, the cluster templates) and the Cluster API
# Operator's ConfigMap in out/release/capi-operator/; built from deploy/ without kustomize.
release-manifests: $(VENV)/.installed-server
	rm -rf out/release
	$(BIN)/python -m kamaji_broker.release --deploy deploy --out out/release

# bench/metrics_plot.py plots with matplotlib (the plot extra).
$(VENV)/.installed-plot: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,plot]'
	touch $@

bench: $(VENV)/.installed-test $(VENV)/.installed-plot
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .sandbox .mypy_cache .pytest_cache .ruff_cache out
