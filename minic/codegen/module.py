"""A whole Program -> one LLVM module with one entry point, optimised and
turned into machine code: the pipeline's llvm, asm and object stages (minic/pipeline.py).

The entry point is ``void minic_entry(ptr buffers, ptr sizes, ptr status)``:
``buffers`` is an array of pointers in ``entry_buffers(program)`` order, ``sizes``
an array of i64 in ``program.sizes`` order, ``status`` the caller's status word
(``i64[2]``, zeroed by the caller) where a failed data check reports.  It calls
the kernels in turn, so one call from Python runs the whole model.  The status
word is the caller's, not a global of the module, so that calls from several
threads at once each hear only of their own data.
"""
from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir

from minic.codegen.emit import I64, PTR, VOID, Emitter, define, element
from minic.options import Target, converts_bf16, dots_u8s8
from minic.codegen.elf import check_machine
from minic.codegen.target import is_host, target_machine, triple
from minic.ir.loops import STATUS, Buffer, Function, Program, Role, Seq, Stmt, Store, structure, walk_stmts

ENTRY = "minic_entry"


def entry_buffers(program: Program) -> list[Buffer]:
    """The order of the entry point's pointer array: inputs, outputs, constants, temporaries."""
    consts = [program.buffers[name] for name in program.constants]
    temps = [b for b in program.buffers.values() if b.role == Role.TEMP]
    return list(program.inputs) + list(program.outputs) + consts + temps


def reports(k: Function) -> bool:
    """Whether kernel ``k`` has data checks: it then takes the status word's address
    after its sizes (the last argument)."""
    return any(isinstance(s, Store) and s.buffer.role == Role.STATUS for s in walk_stmts(k.body))


PART = 64     # top-level loop nests per LLVM function; a kernel with more is emitted as parts


def _kernel(module: ir.Module, k: Function, options: Target) -> ir.Function:
    """The LLVM function of kernel ``k``.  A kernel of many top-level statements (a concat of
    thousands of inputs: one copy nest each) is emitted as parts of ``PART`` statements, each a
    function the kernel calls in turn: LLVM's optimizer grows faster than a function's size (a
    concat of 2,000 inputs as one function of 2,000 loops: 11.5 s; 1,000: 3.7 s).  The parts
    share nothing but the kernel's arguments: a local buffer lives inside one statement."""
    checked = reports(k)
    args = [PTR] * len(k.params) + [I64] * len(k.sizes) + [PTR] * checked
    stmts = k.body.stmts if isinstance(k.body, Seq) else (k.body,)
    if len(stmts) <= PART:
        return _function(module, k.name, args, k, k.body, options)
    outer, b = define(module, k.name, VOID, args)
    for start in range(0, len(stmts), PART):
        part = _function(module, f"{k.name}.part{start // PART}", args, k, Seq(stmts[start:start + PART]), options)
        b.call(part, list(outer.args))
    b.ret_void()
    outer.attributes.add("noinline")
    return outer


def _function(module: ir.Module, name: str, args: list[ir.Type], k: Function, body: Stmt,
              options: Target) -> ir.Function:
    """``void name(params..., sizes..., [status])`` running ``body`` over kernel ``k``'s arguments."""
    e = Emitter(module, name, args, options.threads, converts_bf16(options), dots_u8s8(options))
    for arg, b in zip(e.function.args, k.params):
        arg.name = b.name
        arg.add_attribute("noalias")          # distinct buffers never overlap within a kernel
        e.ptrs[b.name] = arg
    for arg, s in zip(e.function.args[len(k.params):], k.sizes):
        arg.name = s
        e.vars[s] = arg
    if len(args) > len(k.params) + len(k.sizes):
        status = e.function.args[-1]
        status.name = STATUS.name
        status.add_attribute("noalias")
        e.ptrs[STATUS.name] = status
    e.stmt(body)
    e.b.ret_void()
    # A kernel stays a function of its own: inlined into the entry, a graph of n kernels is one
    # function of n loops, and LLVM's code generation grows faster than n (a DAG of 2,000 adds:
    # 9.8 s and 575 MB; apart: 0.2 s).  A call per kernel costs nanoseconds.
    e.function.attributes.add("noinline")
    return e.function


def build_module(program: Program, options: Target) -> ir.Module:
    """The LLVM IR module (unoptimised) of ``program``."""
    module = ir.Module(name=program.name)
    module.triple = triple(options)
    # Kernels equal up to their buffers' names (a model's repeated layers) share one function.
    shared: dict[str, ir.Function] = {}
    kernels = {}
    for k in program.kernels:
        key = structure(k)
        if key not in shared:
            shared[key] = _kernel(module, k, options)
        kernels[k.name] = shared[key]
    entry, b = define(module, ENTRY, VOID, [PTR, PTR, PTR], internal=False)
    buffers_arg, sizes_arg, status_arg = entry.args
    slot = {buf.name: k for k, buf in enumerate(entry_buffers(program))}
    sizes = {s: b.load(element(b, sizes_arg, k, I64), typ=I64, name=s) for k, s in enumerate(program.sizes)}
    for k in program.kernels:
        pointers = [b.load(element(b, buffers_arg, slot[p.name], PTR), typ=PTR) for p in k.params]
        b.call(kernels[k.name], pointers + [sizes[s] for s in k.sizes] + [status_arg] * reports(k))
    b.ret_void()
    return module


def optimize_module(module: ir.Module, options: Target) -> llvm.ModuleRef:
    """An IR module (e.g. one a profiler changed) parsed, verified and optimised."""
    tm = target_machine(options)
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    if options.opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=min(options.opt_level, 3))
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return mod


def emit_object(module: llvm.ModuleRef, options: Target) -> bytes:
    """Machine code (an object file) of an optimised module for ``options``' target; one
    for another machine is checked to carry that machine's ELF number."""
    obj = target_machine(options).emit_object(module)
    if not is_host(options):
        check_machine(obj, options.triple)
    return obj


def emit_assembly(module: llvm.ModuleRef, options: Target) -> str:
    """The target's assembly of an optimised module."""
    return target_machine(options).emit_assembly(module)
