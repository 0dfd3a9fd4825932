//! Circles in a graph of files: its strongly connected components of more
//! than one file (Tarjan's algorithm), each file of one reaching every
//! other through references.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::tree::Edge;

/// Each circle: its files, sorted, and the edges between them.
pub fn circles(edges: &[Edge]) -> Vec<(Vec<PathBuf>, Vec<Edge>)> {
    let mut ids: BTreeMap<&PathBuf, usize> = BTreeMap::new();
    for e in edges {
        for f in [&e.from, &e.to] {
            let n = ids.len();
            ids.entry(f).or_insert(n);
        }
    }
    let mut names = vec![PathBuf::new(); ids.len()];
    for (f, &i) in &ids {
        names[i] = (*f).clone();
    }
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    for e in edges {
        next[ids[&e.from]].push(ids[&e.to]);
    }
    let mut out = Vec::new();
    for component in components(&next) {
        if component.len() < 2 {
            continue;
        }
        let mut files: Vec<PathBuf> = component.iter().map(|&i| names[i].clone()).collect();
        files.sort();
        let inside: Vec<Edge> = edges
            .iter()
            .filter(|e| files.contains(&e.from) && files.contains(&e.to))
            .cloned()
            .collect();
        out.push((files, inside));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Tarjan's strongly connected components of the graph `next` (each node's
/// successors), without recursion so a deep chain of files cannot overflow
/// the stack.
fn components(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let n = next.len();
    let (mut index, mut low) = (vec![UNSEEN; n], vec![0; n]);
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut counter = 0;
    let mut out = Vec::new();
    for start in 0..n {
        if index[start] != UNSEEN {
            continue;
        }
        // (node, how many of its successors have been looked at)
        let mut work = vec![(start, 0usize)];
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if *k == 0 && index[v] == UNSEEN {
                index[v] = counter;
                low[v] = counter;
                counter += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = next[v].get(*k) {
                *k += 1;
                if index[w] == UNSEEN {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(component);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_of_a_small_graph() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> 4 -> 3, 5 alone
        let next = vec![vec![1], vec![2], vec![0, 3], vec![4], vec![3], vec![]];
        let mut found: Vec<Vec<usize>> = components(&next)
            .into_iter()
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        found.sort();
        assert_eq!(found, vec![vec![0, 1, 2], vec![3, 4], vec![5]]);
    }
}
