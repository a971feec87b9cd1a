"""Exercise 6.1, an answer: the loop in the form LLVM's loop-rotate gives it.  A guard before
the loop (start < end, else straight to the end), the body with the phi at its top, and the
test at the bottom: one conditional branch per iteration instead of a conditional one in the
head and an unconditional one back.  Without the guard the body runs once at N = 0."""
from llvmlite import ir

from minic.codegen.emit import I64


def SERIAL(self, s, start, end):
    """Loop s over [start, end), tested at the bottom: a guard, the body, a latch."""
    b, var = self.b, s.var.name
    before = b.block
    body, done = (b.function.append_basic_block(f"{var}.{k}") for k in ("body", "done"))
    b.cbranch(b.icmp_signed("<", start, end), body, done)        # the guard: no iteration at all?
    b.position_at_end(body)
    i = b.phi(I64, name=var)
    i.add_incoming(start, before)
    self.vars[var] = i
    self.stmt(s.body)                           # may leave the builder in another block (a nested loop's end)
    following = b.add(i, ir.Constant(I64, 1), flags=["nsw"])
    i.add_incoming(following, b.block)
    b.cbranch(b.icmp_signed("<", following, end), body, done)   # the latch: another iteration?
    b.position_at_end(done)
    del self.vars[var]
