"""The optional compiled wire reader (`ingest/export/_wire.c`, decision 0018): built in
place when a C compiler is present; without one the install goes on and
`ingest.export.flat` reads the bytes in pure Python."""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "ingest/export/_wire.c"
# The source's digest, compiled in: `ingest.export.flat` keeps the pure form when the
# built module is not the source beside it (a checkout pulled without a rebuild).
DIGEST = hashlib.sha256((Path(__file__).parent / SOURCE).read_bytes()).hexdigest()[:16]

setup(
    ext_modules=[
        Extension(
            "ingest.export._wire",
            sources=[SOURCE],
            define_macros=[("WIRE_SOURCE", f'"{DIGEST}"')],
            optional=True,
        )
    ]
)
