"""The IREE bridge: torch -> torch-mlir / iree-turbine -> IREE llvm-cpu -> IREE runtime.

One rule shapes this package: IREE's compiler (``iree.compiler``, which
``iree.turbine`` imports) and the xtc MLIR bindings that ``bridges/mlir`` uses
(``import mlir``) cannot load in one process, in either order -- both wheels ship
``libnanobind-mlir.so`` under the same name.  So nothing here imports IREE's
compiler: compiling runs the ``iree-compile`` tool (``compiler.py``) and the
turbine export runs in a child Python process (``child.py``, which refuses to be
imported).  ``iree.runtime`` and torch-mlir load beside either, in this process.
"""
