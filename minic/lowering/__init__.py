"""Lowering: Graph (with fusion groups) -> Loop IR Program.

Read in this order: ``compute.py`` (the compute language and how a Reduce
becomes loops), ``rules/`` (what each op's output element is), ``kernel.py``
(a fusion group -> one kernel), ``program.py`` (a Graph -> kernels + buffers).
"""
from minic.lowering.program import lower_graph

__all__ = ["lower_graph"]
