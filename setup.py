"""The optional C extensions, built where a C compiler is present; where a build fails, dynfuse
runs that part in pure Python (``dynfuse.accelerate`` says what is in use):

- ``dynfuse._recorder`` (dynfuse/_recorder.c): the recorder's hot path;
- ``dynfuse._launch`` (dynfuse/_launch.c): calling compiled CPU kernels on arrays (NumPy's C API).
"""

import numpy
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "dynfuse._recorder", ["dynfuse/_recorder.c"], include_dirs=[numpy.get_include()], optional=True
        ),
        Extension(
            "dynfuse._launch", ["dynfuse/_launch.c"], include_dirs=[numpy.get_include()], optional=True
        ),
    ]
)
