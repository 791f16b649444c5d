"""Both forms of the hot path's wire reader (`ingest.export.flat`): the pure one, and
the compiled one where it was built (`setup.py`; skipped, saying so, where not)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ingest.export import flat

NOT_BUILT = (
    "the compiled wire reader ingest.export._wire is not built (no C compiler at "
    "install): only the pure form is tested"
)


@pytest.fixture(scope="module", params=["pure", "compiled"])
def wire_form(request: pytest.FixtureRequest) -> Iterator[flat.Form]:
    """The form `flat.spans` reads with, for the module's tests that ask for it."""
    form = flat.PURE if request.param == "pure" else flat.COMPILED
    if form is None:
        pytest.skip(NOT_BUILT)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flat, "FORM", form)
        yield form
