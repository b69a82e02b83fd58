"""kubernetes_asyncio without loading its generated API and model classes until someone asks.

The package's ``__init__`` files import every generated API class and every model (841 modules):
35 MB of resident memory and a third of a second in every process that imports it, though
``common.kube`` uses only ``ApiClient.call_api``, ``Configuration``, the kubeconfig and in-cluster
loaders and the exceptions. ``install`` registers ``kubernetes_asyncio``, ``.client``,
``.client.models`` and ``.config`` as packages whose ``__init__`` has not run yet, imports those
few modules (the library's own, unchanged), and runs a package's real ``__init__`` the first
time anything asks it for a name it does not have yet: a test or a tool that uses
``client.CoreV1Api`` or a model gets the whole library, as before.

Installed once, by ``common.kube``, before its modules import the library; a process that
imported kubernetes_asyncio already keeps it as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from pathlib import Path
from typing import Any, Final

ROOT: Final = "kubernetes_asyncio"

_USED: Final = (
    ("client.configuration", ("Configuration",)),
    ("client.exceptions", ()),
    ("client.rest", ()),
    ("client.api_client", ("ApiClient",)),
    ("config.config_exception", ("ConfigException",)),
    ("config.incluster_config", ("load_incluster_config",)),
    ("config.kube_config", ("load_kube_config", "new_client_from_config")),
)
"""What ``common.kube`` uses, and the names each gives its package (as the package's ``__init__``
would), in an order in which each finds what it imports already there."""


_METADATA: Final = frozenset({"__version__", "__all__", "__project__"})
"""The underscored names a package's ``__init__`` defines that a reader may ask for."""

_LOADING: Final = threading.RLock()


class _Deferred(types.ModuleType):
    """A package whose ``__init__`` runs the first time a name it lacks is asked for."""

    __init_file__: str

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") and name not in _METADATA:
            # Introspection (``__wrapped__``, pytest's ``_pytestfixturefunction``) loads nothing.
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        with _LOADING:  # another thread asking meanwhile waits, as for an import
            init = self.__dict__.pop("__init_file__", None)
            if init is not None:
                try:
                    self._load(init)
                except BaseException:
                    self.__dict__["__init_file__"] = init  # interrupted: the next ask runs it again
                    raise
        if name in self.__dict__:
            return self.__dict__[name]
        try:
            return importlib.import_module(f"{self.__name__}.{name}")  # a subpackage not loaded yet
        except ModuleNotFoundError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None

    def _load(self, init: str) -> None:
        """Run the package's own ``__init__`` into this module. What was bound here before stays
        bound (a name patched by a test, what ``install`` gave): a package loaded at once would
        have had it first too. While it runs, a name asked for from within (the same thread) is
        found as in any module being imported: if it is there already."""
        before = {k: v for k, v in self.__dict__.items() if not k.startswith("__")}
        code = compile(Path(init).read_bytes(), init, "exec", dont_inherit=True)
        exec(code, self.__dict__)
        self.__dict__.update(before)


def _register(name: str, directory: Path) -> _Deferred:
    module = _Deferred(name)
    module.__path__ = [str(directory)]
    module.__file__ = str(directory / "__init__.py")
    module.__init_file__ = module.__file__
    module.__package__ = name
    module.__spec__ = importlib.util.spec_from_file_location(
        name, module.__file__, submodule_search_locations=[str(directory)]
    )
    sys.modules[name] = module
    parent, _, leaf = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], leaf, module)
    return module


def install() -> bool:
    """Defer the library's generated classes in this process; False when it was imported already
    (or cannot be found), and nothing was changed."""
    if ROOT in sys.modules:
        return False
    spec = importlib.util.find_spec(ROOT)
    if spec is None or not spec.submodule_search_locations:
        return False
    root = Path(next(iter(spec.submodule_search_locations)))
    for suffix in ("", ".client", ".client.models", ".config"):
        _register(ROOT + suffix, root / suffix[1:].replace(".", "/"))
    for name, exported in _USED:
        module = importlib.import_module(f"{ROOT}.{name}")
        package = sys.modules[f"{ROOT}.{name.rpartition('.')[0]}"]
        for attribute in exported:
            setattr(package, attribute, getattr(module, attribute))
    return True
