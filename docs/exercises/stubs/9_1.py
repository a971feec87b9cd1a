"""Exercise 9.1: the op mish, x * tanh(softplus(x)).  Fill in the three functions, uncomment
the definition, then:
    python docs/exercises/check.py 9.1 THIS_FILE"""
import numpy as np

from minic.errors import UserError
from minic.ir.loops import BinOp, Call, const
from minic.ir.ops import OpKind, define
from minic.ir.ops.elementwise import arg


def mish_infer(attrs, types):
    """A float input only (UserError otherwise); the result has its type."""


def mish_reference(attrs, x):
    """numpy, in a form that never overflows."""


def mish_rule(site, index):
    """One output element, with the functions of minic.ir.loops.CALLS only."""


# define("mish", OpKind.ELEMENTWISE, mish_infer, mish_reference, mish_rule,
#        doc="x * tanh(log(1 + exp(x)))", torch=lambda t, x: ...)
