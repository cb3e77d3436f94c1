import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The app's modules form layers (lib below components, a component below
// the ones that show it): a circle among them means a module reaches back
// up for something that belongs lower, and makes the order in which the
// bundle evaluates them matter.

const src = dirname(fileURLToPath(import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sources(p);
    return /\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name) ? [p] : [];
  });
}

/** importsOf lists the app's own modules that file imports (type-only imports included: they are a dependency of the source all the same). */
function importsOf(file: string, known: Set<string>): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/^\s*(?:import|export)[^'"]*?from\s+['"](\.{1,2}\/[^'"]+)['"]/gm)) {
    const base = resolve(dirname(file), m[1]);
    const hit = [base, `${base}.ts`, `${base}.tsx`].find((p) => known.has(p));
    if (hit) out.push(hit);
  }
  return out;
}

/** cycle returns one circle of imports among files, or null. */
export function cycle(graph: Map<string, string[]>): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (f: string): string[] | null => {
    if (state.get(f) === 'done') return null;
    if (state.get(f) === 'open') return [...path.slice(path.indexOf(f)), f];
    state.set(f, 'open');
    path.push(f);
    for (const g of graph.get(f) ?? []) {
      const c = visit(g);
      if (c) return c;
    }
    path.pop();
    state.set(f, 'done');
    return null;
  };
  for (const f of graph.keys()) {
    const c = visit(f);
    if (c) return c;
  }
  return null;
}

describe('module imports', () => {
  it('finds a circle when there is one', () => {
    const g = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
    ]);
    expect(cycle(g)).toEqual(['a', 'b', 'c', 'a']);
    expect(cycle(new Map([['a', ['b']], ['b', []]]))).toBeNull();
  });

  it('has no circle among the app modules', () => {
    const files = sources(src);
    const known = new Set(files);
    const graph = new Map(files.map((f) => [f, importsOf(f, known)]));
    expect(graph.size).toBeGreaterThan(10);
    const c = cycle(graph);
    expect(c?.map((f) => f.slice(src.length + 1)) ?? null).toBeNull();
  });
});
