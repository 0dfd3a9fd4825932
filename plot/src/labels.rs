//! Labels above a chart that never overlap: each wants to sit centred on an
//! x position; they are laid into a few rows, the first row where a label
//! clears its neighbours by a gap, in order of importance. A label that fits
//! in no row is left out rather than drawn over another (the shading and the
//! legend still show what it would have named).

/// A label that wants to be centred at `x`, `width` pixels wide.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub x: f64,
    pub width: f64,
    /// Lower is placed first.
    pub priority: u8,
}

/// Pixels kept clear between labels of one row.
pub const GAP: f64 = 6.0;

/// Where each label goes: its row and left edge, or `None` when it does not
/// fit. Labels stay inside `[left, right]`.
pub fn place(labels: &[Wanted], left: f64, right: f64, rows: usize) -> Vec<Option<(usize, f64)>> {
    let mut order: Vec<usize> = (0..labels.len()).collect();
    order.sort_by(|&a, &b| {
        (labels[a].priority, labels[a].x)
            .partial_cmp(&(labels[b].priority, labels[b].x))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut taken: Vec<Vec<(f64, f64)>> = vec![Vec::new(); rows];
    let mut out = vec![None; labels.len()];
    for i in order {
        let l = &labels[i];
        if l.width > right - left {
            continue;
        }
        let x0 = (l.x - l.width / 2.0).clamp(left, right - l.width);
        let x1 = x0 + l.width;
        let free = |row: &Vec<(f64, f64)>| row.iter().all(|&(a, b)| x1 + GAP <= a || b + GAP <= x0);
        if let Some(r) = taken.iter().position(free) {
            taken[r].push((x0, x1));
            out[i] = Some((r, x0));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(x: f64, width: f64, priority: u8) -> Wanted {
        Wanted { x, width, priority }
    }

    #[test]
    fn close_labels_go_to_other_rows_and_never_overlap() {
        // "checkpoint" right next to "idle", as on a job that idles after saving.
        let labels = vec![
            wanted(100.0, 70.0, 0),
            wanted(130.0, 30.0, 1),
            wanted(400.0, 70.0, 0),
        ];
        let p = place(&labels, 0.0, 500.0, 3);
        assert_eq!(p[0], Some((0, 65.0)));
        assert_eq!(p[1].unwrap().0, 1, "idle moves up a row");
        assert_eq!(p[2], Some((0, 365.0)));
    }

    #[test]
    fn labels_that_fit_nowhere_are_left_out_and_edges_are_kept() {
        let labels: Vec<Wanted> = (0..10).map(|i| wanted(50.0 + i as f64, 40.0, 0)).collect();
        let p = place(&labels, 0.0, 200.0, 2);
        assert_eq!(p.iter().flatten().count(), 2);
        let edge = place(
            &[wanted(2.0, 40.0, 0), wanted(199.0, 40.0, 0)],
            0.0,
            200.0,
            1,
        );
        assert_eq!(edge, vec![Some((0, 0.0)), Some((0, 160.0))]);
        // Whatever is placed, no two labels of a row overlap.
        let many: Vec<Wanted> = (0..60)
            .map(|i| {
                wanted(
                    (i * 37 % 500) as f64,
                    20.0 + (i % 5) as f64 * 10.0,
                    (i % 3) as u8,
                )
            })
            .collect();
        let p = place(&many, 0.0, 500.0, 3);
        for (i, a) in p.iter().enumerate() {
            for (j, b) in p.iter().enumerate().skip(i + 1) {
                if let (Some((ra, xa)), Some((rb, xb))) = (a, b) {
                    if ra == rb {
                        let (wa, wb) = (many[i].width, many[j].width);
                        assert!(
                            xa + wa + GAP <= *xb || xb + wb + GAP <= *xa,
                            "{i} and {j} overlap"
                        );
                    }
                }
            }
        }
    }
}
