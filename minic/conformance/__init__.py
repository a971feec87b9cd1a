"""The ONNX backend node suite (``onnx.backend.test``), run case by case against minic.

``run_suite`` runs every case that has a model, each in a worker process
(``pool.py``), and sorts the outcomes into pass / refused (with its reason) /
wrong / crash; ``DENYLIST`` (``denylist.py``) names the cases minic is known to
refuse and why, so the test suite can demand that every other case passes.
"""
from minic.conformance.cases import Result, load_cases, run_case  # noqa: F401
from minic.conformance.denylist import DENYLIST, denied  # noqa: F401
from minic.conformance.pool import run_suite  # noqa: F401
