"""`processors.special`: scipy's ufuncs without `scipy.special`'s start-up, the same
values bit for bit, and a later `import scipy.special` unharmed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
from scipy import special

from processors.special import ufuncs

_CHILD = textwrap.dedent(
    """
    import json, sys
    from processors.special import ufuncs
    u = ufuncs()
    before = sorted(m for m in ("scipy.special", "numpy.f2py", "numpy.testing")
                    if m in sys.modules)
    values = [u.stdtr(7, -1.25).hex(), u.stdtrit(12, 0.975).hex(),
              u.bdtr(3, 17, 0.5).hex(), u.bdtrc(3, 17, 0.5).hex()]
    import scipy.special, scipy.stats
    print(json.dumps({
        "name": u.__name__, "before": before, "values": values,
        "same": scipy.special.stdtr is u.stdtr and scipy.special.bdtr is u.bdtr,
        "stats": scipy.stats.t.sf(1.25, 7).hex(),
    }))
    """
)


def test_a_fresh_process_loads_the_ufuncs_alone_and_scipy_special_after() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout)
    assert found["name"] == "scipy.special._ufuncs"
    assert found["before"] == []  # neither the package nor its array-API layer ran
    assert found["values"] == [
        float(special.stdtr(7, -1.25)).hex(),
        float(special.stdtrit(12, 0.975)).hex(),
        float(special.bdtr(3, 17, 0.5)).hex(),
        float(special.bdtrc(3, 17, 0.5)).hex(),
    ]
    assert found["same"] is True  # the package, imported after, exports those objects
    assert found["stats"] == float(special.stdtr(7, -1.25)).hex()


def test_in_a_process_that_imported_scipy_special_it_is_the_package() -> None:
    assert ufuncs() is special
    dof = np.arange(1, 60)
    assert np.array_equal(ufuncs().stdtr(dof, -0.7), special.stdtr(dof, -0.7))
