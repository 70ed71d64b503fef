"""Cached numba kernels loaded lean: the machine code without the typing and lowering registries, the environments
without numba's modules, the linking bitcode parsed only when a later compilation links the library.

Beside :mod:`evalengine.kernel_cache` (which decides when a cached kernel is stale); switched on by the command's
own process alone (``cli.run`` calls :func:`load_lean`): a notebook's numba loads its kernels numba's way.
"""

import sys

NUMBA_INTERNALS_CHECKED = "0.68."  # the numba release whose private caching API this module was checked on


def load_lean() -> None:
    """numba's ``Cache.load_overload`` refreshes its typing and lowering registries before it loads a cached kernel:
    ~0.2 CPU s of imports and template set-up per process (cffi's C parser among them), though a cached kernel is
    machine code that needs none of them (the modules its environment names are imported as it is unpickled, and a
    kernel that does compile refreshes them then, in ``CompilerBase.__init__``). Called by the command's process once
    its modules are imported, it loads cached kernels with the runtime alone (``load_overload`` less the refresh,
    only on the numba of ``NUMBA_INTERNALS_CHECKED``); a process that imported no numba is left without it."""
    numba = sys.modules.get("numba")
    if numba is None or not numba.__version__.startswith(NUMBA_INTERNALS_CHECKED):
        return
    from numba.core import caching
    from numba.core.runtime import rtsys

    def load_overload(cache, signature, target_context):
        rtsys.initialize(target_context)  # what the refresh's first step does: the runtime the kernels call
        with cache._guard_against_spurious_io_errors():
            return cache._load_overload(signature, target_context)

    caching.Cache.load_overload = load_overload
    _environments_without_imports()
    _libraries_linked_on_demand()


def _environments_without_imports() -> None:
    """A cached kernel's environments (one per function compiled into it, numba's own array and ufunc helpers among
    them) are unpickled with the globals of the module that defined each, imported for it: ``numba.np.arrayobj``,
    ``arraymath``, ``npyimpl`` (and its ufunc table), ~0.1 CPU s, though only object-mode code reads those globals
    (``pylowering``: no kernel of evalengine is object mode). A module not imported yet gets a namespace with its
    name alone; any other environment is numba's own."""
    from numba.core import environment

    rebuild = environment._rebuild_env

    def rebuild_env(modname, consts, env_name):
        if modname in sys.modules or environment.lookup_environment(env_name) is not None:
            return rebuild(modname, consts, env_name)
        env = environment.Environment({"__name__": modname})
        env.consts[:] = consts
        env.env_name = env_name
        environment.Environment._memo[env_name] = env
        return env

    environment._rebuild_env = rebuild_env  # what the pickled environments name, looked up as they are loaded


def _libraries_linked_on_demand() -> None:
    """A cached kernel's library holds its machine code and the LLVM bitcode another kernel would inline it from;
    numba parses that bitcode as it loads the kernel to list the symbols the code defines (~0.15 CPU s for the bbox
    command's kernels), though only a kernel compiled later in the process links it. Here the symbols are read from
    the machine code's ELF symbol table (the same names) and the bitcode is parsed when first linked
    (``_get_module_for_linking``, the one reader of ``_shared_module``); other object formats load numba's way."""
    import llvmlite.binding as ll
    from numba.core import codegen

    library_class, unserialize = codegen.CPUCodeLibrary, codegen.CPUCodeLibrary._unserialize.__func__
    module_for_linking = library_class._get_module_for_linking

    def _unserialize(cls, code, state):
        name, kind, data = state
        symbols = elf_defined_symbols(data[0]) if kind == "object" else None
        if symbols is None:
            return unserialize(cls, code, state)
        library = code.create_library(name)
        library.enable_object_caching()
        library._set_compiled_object(data[0])
        library._shared_bitcode = data[1]
        library._finalize_final_module()
        code._engine._defined_symbols |= symbols
        return library

    def _get_module_for_linking(library):
        bitcode = library.__dict__.pop("_shared_bitcode", None)
        if bitcode is not None:
            library._shared_module = ll.parse_bitcode(bitcode)
        return module_for_linking(library)

    library_class._unserialize = classmethod(_unserialize)
    library_class._get_module_for_linking = _get_module_for_linking


_ELF_SECTION = [("name", "<u4"), ("type", "<u4"), ("flags", "<u8"), ("addr", "<u8"), ("offset", "<u8"),
                ("size", "<u8"), ("link", "<u4"), ("info", "<u4"), ("addralign", "<u8"), ("entsize", "<u8")]
_ELF_SYMBOL = [("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"), ("size", "<u8")]


def elf_defined_symbols(code: bytes) -> set | None:
    """The names of the functions and data an ELF64 little-endian object defines (symbol types none, object,
    function; section index not undefined), or None for another format."""
    import numpy as np

    if code[:6] != b"\x7fELF\x02\x01":
        return None
    sections = np.frombuffer(code, _ELF_SECTION, int.from_bytes(code[0x3C:0x3E], "little"),
                             int.from_bytes(code[0x28:0x30], "little"))
    names = set()
    for table in sections[sections["type"] == 2]:  # SHT_SYMTAB
        symbols = np.frombuffer(code, _ELF_SYMBOL, int(table["size"]) // 24, int(table["offset"]))
        strings = sections[table["link"]]
        text = code[int(strings["offset"]):int(strings["offset"] + strings["size"])]
        for start in symbols["name"][(symbols["shndx"] != 0) & (symbols["info"] & 0xF <= 2)].tolist():
            names.add(text[start:text.index(b"\0", start)].decode())
    return names
