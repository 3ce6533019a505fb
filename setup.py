"""The optional C recorder (dynfuse/_recorder.c): built where a C compiler is present; where the
build fails, dynfuse records in pure Python (dynfuse.accelerate says which is in use)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("dynfuse._recorder", ["dynfuse/_recorder.c"], optional=True)])
