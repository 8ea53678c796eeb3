"""The wheel is the product: it must carry the window reader, which javac compiles (`make reader`)
against the pinned Spark's jars. Compiling it here would need a JDK and PySpark's 400 MB in the
build's environment; the jar is Java bytecode, the same for every platform, so it is compiled
once before the build and packaged. Everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

READER = Path(__file__).parent / "kafka_recon" / "jars" / "kafka-recon-reader.jar"


class BuildWithReader(build_py):
    def run(self) -> None:
        if not getattr(self, "editable_mode", False) and not READER.is_file():
            raise SystemExit(f"no {READER}: run `make reader` (or `make wheel`) before building; "
                             "the wheel ships the window reader")
        super().run()


setup(cmdclass={"build_py": BuildWithReader})
