"""The optional compiled wire reader (`ingest/export/_wire.c`, decision 0018): built in
place when a C compiler is present; without one the install goes on and
`ingest.export.flat` reads the bytes in pure Python."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ingest.export._wire",
            sources=["ingest/export/_wire.c"],
            optional=True,
        )
    ]
)
