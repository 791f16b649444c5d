"""scipy's special functions (the t and binomial distributions' ufuncs) without
`scipy.special`'s package start-up.

`scipy.special/__init__` imports its array-API layer, which imports `numpy.f2py`,
`numpy.ma` and `numpy.testing`: 0.15-0.3 s of an offline command that needs three
ufuncs (bench/RESULTS.md, issue 24). `ufuncs()` loads the compiled modules those
ufuncs live in, as the package would (`scipy` itself, cheap, is imported normally),
and registers them under their own names: the same ufunc objects the package exports
(`scipy.special.stdtr is scipy.special._ufuncs.stdtr`), so every value is the
package's, bit for bit. A later `import scipy.special` finds them and finishes its
own start-up around them. Anything unexpected (another scipy layout, a module that
fails) falls back to the package's import.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import threading
from types import ModuleType

_UFUNCS = "scipy.special._ufuncs"
# What `_ufuncs` imports when it starts (scipy 1.11-1.17), each by its full name: one
# not yet in `sys.modules` would import `scipy.special` (its parent) first.
_DEPENDENCIES = (
    "scipy.special._ufuncs_cxx",
    "scipy.special._special_ufuncs",
    "scipy.special._ellip_harm_2",
    "scipy.special._gufuncs",
)
_lock = threading.Lock()


def ufuncs() -> ModuleType:
    """The module holding `stdtr`, `stdtrit`, `bdtr`, `bdtrc`: `scipy.special` when
    this process already imported it, else its compiled `_ufuncs` loaded alone."""
    with _lock:
        for name in ("scipy.special", _UFUNCS):
            loaded = sys.modules.get(name)
            if loaded is not None:
                return loaded
        alone = _load_alone()
        if alone is not None:
            return alone
    return importlib.import_module("scipy.special")


def _load_alone() -> ModuleType | None:
    """`_ufuncs` and the compiled modules it imports, loaded from scipy.special's
    directory without running its `__init__`; None (and nothing left registered)
    when any of them is not an extension module there or fails to load."""
    try:
        import scipy  # the top package: its own start-up is light, its layers lazy

        directories = [f"{path}/special" for path in scipy.__path__]
    except (ImportError, AttributeError):
        return None
    registered: list[str] = []
    try:
        for name in (*_DEPENDENCIES, _UFUNCS):
            if name in sys.modules:
                continue
            spec = importlib.machinery.PathFinder.find_spec(name, directories)
            if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
                raise ImportError(f"{name} is not an extension module beside scipy.special")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            registered.append(name)
            spec.loader.exec_module(module)
    except Exception:  # any failure: the package's own import, from a clean slate
        for name in registered:
            sys.modules.pop(name, None)
        return None
    module = sys.modules[_UFUNCS]
    if "scipy.special" in sys.modules:  # one of them imported the package after all
        return sys.modules["scipy.special"]
    return module
