# A package, so that pytest imports this directory's conftest as
# tests.conftest and leaves the module name "conftest" to tests/conftest.py,
# whose helpers the workspace tests import with `from conftest import ...`.
