"""Exercise 6.1: a loop tested at the bottom.  SERIAL replaces minic's Emitter.serial
(minic/codegen/emit.py; chapter 6 quotes it) while the checker compiles its kernels.  As it
stands it is minic's own: the test at the top.  Rewrite it, then:
    python docs/exercises/check.py 6.1 THIS_FILE"""
from llvmlite import ir

from minic.codegen.emit import I64, loop_head


def SERIAL(self, s, start, end):
    """Loop ``s`` over [start, end): ``self`` is the Emitter (``self.b`` its IRBuilder,
    ``self.vars`` the loop variables in scope, ``self.stmt`` emits the body)."""
    b, var = self.b, s.var.name
    before = b.block
    head = loop_head(b, f"{var}.head")
    loop, done = (b.function.append_basic_block(f"{var}.{k}") for k in ("body", "done"))
    i = b.phi(I64, name=var)
    i.add_incoming(start, before)
    b.cbranch(b.icmp_signed("<", i, end), loop, done)
    b.position_at_end(loop)
    self.vars[var] = i
    self.stmt(s.body)
    i.add_incoming(b.add(i, ir.Constant(I64, 1), flags=["nsw"]), b.block)
    b.branch(head)
    b.position_at_end(done)
    del self.vars[var]
