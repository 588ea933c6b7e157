# The native module (cpp/bindings), for type checkers: pybind11 records no types a checker reads,
# so every name it exports is Any.
from typing import Any

def __getattr__(name: str) -> Any: ...
