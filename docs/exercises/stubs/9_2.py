"""Exercise 9.2: the binary op hypot, sqrt(a² + b²), with broadcasting.  Fill in the three
functions, uncomment the definition, then:
    python docs/exercises/check.py 9.2 THIS_FILE"""
import numpy as np

from minic.errors import UserError
from minic.ir.loops import BinOp, Call, Select, const
from minic.ir.ops import OpKind, define
from minic.ir.ops.elementwise import arg
from minic.ir.ops.shapes import broadcast
from minic.ir.types import TensorType


def hypot_infer(attrs, types):
    """Two float inputs of one dtype (UserError otherwise), broadcast together."""


def hypot_reference(attrs, a, b):
    """numpy, of a's dtype."""


def hypot_rule(site, index):
    """One output element (arg(x, index) broadcasts), finite wherever the result is."""


# define("hypot", OpKind.ELEMENTWISE, hypot_infer, hypot_reference, hypot_rule, arity=(2, 2),
#        doc="sqrt(a² + b²), with broadcasting", torch=...)
