#!/usr/bin/env python3
"""Import circles between the modules (files) of each crate: exits 1 and prints each circle
when one exists, 0 when the module graph of every crate is acyclic.

A file's edges are the modules it names through `crate::...` and `super::...` paths (in `use`
items and in code), tests left out (everything from `#[cfg(test)]` on, and `tests/`, `benches/`,
`examples/`). A path resolves to the longest module of the crate it names: `crate::a::b::C`
is `a/b.rs` (or `a/b/mod.rs`) when that file exists, else `a.rs` / `a/mod.rs`. A module's
`mod.rs` naming its own children is not an edge back (a parent declares its children).

Exempt: files whose header says they are generated (`generated` in their first lines); their
circles are the generator's shape, not a design.

Usage: scripts/module-cycles.py [CRATES_DIR]   (default: crates/ of this repository)
"""

import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_files(src: Path) -> dict:
    """Module path (tuple) -> file, for every module file under `src`."""
    out = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        out[tuple(parts)] = f
    return out


def non_test_text(f: Path) -> str:
    text = f.read_text(encoding="utf-8", errors="replace")
    cut = re.search(r"^\s*#\[cfg\(test\)\]", text, re.M)
    text = text[: cut.start()] if cut else text
    # Comments are not imports.
    return re.sub(r"//[^\n]*", "", text)


def generated(f: Path) -> bool:
    head = "\n".join(f.read_text(encoding="utf-8", errors="replace").splitlines()[:5])
    return "generated" in head.lower()


def paths_after(text: str, prefix: str):
    """Every path following `prefix::` (brace groups expanded one level)."""
    for m in re.finditer(rf"\b{prefix}::", text):
        rest = text[m.end():]
        if rest.startswith("{"):
            depth, end = 0, 0
            for i, c in enumerate(rest):
                depth += c == "{"
                depth -= c == "}"
                if depth == 0:
                    end = i
                    break
            for item in re.split(r",", rest[1:end]):
                seg = re.findall(IDENT, item.split("{")[0])
                if seg:
                    yield seg
        else:
            seg = re.match(rf"{IDENT}(?:::{IDENT})*", rest)
            if seg:
                yield seg.group(0).split("::")


def resolve(mods: dict, path: list):
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in mods:
            return tuple(path[:n])
    return None


def crate_graph(src: Path):
    mods = module_files(src)
    graph = {m: set() for m in mods}
    for m, f in mods.items():
        text = non_test_text(f)
        is_dir_module = f.name in ("mod.rs", "lib.rs", "main.rs")
        # `super` is the enclosing module, for a file module (`a/b.rs`: `a`) as for a folder's
        # `mod.rs` (`a/mod.rs`: the crate root).
        targets = [list(p) for p in paths_after(text, "crate")]
        targets += [list(m[:-1]) + p for p in paths_after(text, "super")]
        for path in targets:
            t = resolve(mods, path)
            if t is None or t == m or t == ():
                continue
            # A parent naming its own child is the module tree, not an import back.
            if t[: len(m)] == m and is_dir_module:
                continue
            graph[m].add(t)
    return mods, graph


def circles(graph: dict):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "crates"
    found = 0
    crates = sorted(p for p in root.iterdir() if (p / "src").is_dir())
    for crate in crates:
        mods, graph = crate_graph(crate / "src")
        for comp in circles(graph):
            if any(generated(mods[m]) for m in comp):
                continue
            found += 1
            print(f"{crate.name}: import circle between {len(comp)} modules:")
            for m in comp:
                names = sorted("::".join(t) for t in graph[m] if t in comp)
                print(f"  {mods[m].relative_to(root)} -> {', '.join(names)}")
    if found:
        print(f"module-cycles: {found} circle(s)", file=sys.stderr)
        return 1
    print(f"module-cycles: no import circle in {len(crates)} crates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
