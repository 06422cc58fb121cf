"""epochlib: the pure-Python Kafka epoch codec and detection rules of epoch-audit.

Imports neither pyspark nor deltalake: the same functions run in unit tests, in Spark
executors (through Arrow batch functions) and in notebooks.
"""

from .errors import DecodeError

__all__ = ["DecodeError"]
__version__ = "0.1.0"
