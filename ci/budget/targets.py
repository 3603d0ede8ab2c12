"""What the registry can compile on this machine, and the one line a failure is told in (for the options and the
work alike, so that checking the options does not import the compiling)."""

from __future__ import annotations


def compile_targets() -> list[tuple[str, str, str]]:
    """Every (kernel, arch, config) the registry says ``compile_only`` can build here, sorted."""
    from kernels.registry import all_kernels

    return sorted((k.name, a, config) for k in all_kernels() for a in k.compile_archs for config in k.configs)


def describe_error(exc: BaseException) -> str:
    """One readable line: the outermost error and, when different, the root cause it wraps."""
    chain = [exc]
    while (inner := chain[-1].__cause__ or chain[-1].__context__) is not None:
        chain.append(inner)
        if len(chain) > 20:
            break

    def line(e: BaseException) -> str:
        text = " ".join(str(e).split())
        return f"{type(e).__name__}: {text[:600]}"

    outer, root = line(chain[0]), line(chain[-1])
    return outer if len(chain) == 1 else f"{outer.split(' at ')[0][:200]} ... caused by {root}"
