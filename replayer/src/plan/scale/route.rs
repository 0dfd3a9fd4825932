//! Which target ranks make each traced call, and how: the [`Model`] applied
//! call by call, in trace order.
//!
//! - A dataset file's *visit* (its open, the calls on that descriptor, its
//!   close; or one call by path) goes, with `--data shard`, to one of the
//!   target ranks that share its source rank's reads, in turn, as a
//!   distributed sampler deals samples: every visit is made once, so every
//!   file is read as many times as traced and the bytes add up to the
//!   trace's. With `--data replicate` it goes to every clone. The k ranks
//!   sharing a source rank make its visits k at a time, side by side, as
//!   the job's ranks at N each make a step at once: each visit of such a
//!   group is moved to the time the group's first was traced at, and a
//!   stretch of steps begins a group (see [`Group`]).
//! - A checkpoint file's calls go to the writers of its family; their
//!   writes are cut (or stretched) so each writer writes its share: while a
//!   writer's budget is below its pattern's bytes, calls keep their traced
//!   sizes and those past the budget are left out; above it, sizes and
//!   offsets grow in proportion.
//! - Everything else (directories, files only looked at, start-up) goes to
//!   every clone of its source rank: each rank's own, as traced.

use std::collections::HashMap;

use iorepro_format::Op;

use super::model::{CheckpointLayout, Model, PathRole};
use super::DataMode;
use crate::plan::ops::PlannedOp;
#[cfg(doc)]
use crate::plan::survey::Survey;
use crate::plan::survey::NO_PATH;

/// Where an open descriptor's calls go.
#[derive(Debug, Clone, Copy)]
enum Held {
    /// A dataset visit made by one target rank, its calls moved this much
    /// earlier (ns).
    Visit(u32, i64),
}

/// The visits of a source rank being dealt, one to each rank sharing its
/// reads. The traced rank made them one step after another; at N the
/// sharers make them at once, each at the time the first was traced at.
/// Without it the k-th sharer of a phase would start its steps k - 1
/// traced steps late, its ranks would never read side by side as the
/// job's do after a save, and that wait would count as its compute.
#[derive(Debug, Default, Clone, Copy)]
struct Group {
    /// The stretch of steps it is in (see [`Survey::stretches`]).
    stretch: u32,
    /// When the group's first visit was traced.
    first_ns: i64,
    /// Visits the group still takes.
    left: u32,
}

/// The time a source rank spent in its dataset visits' calls, in trace
/// order: what a rank sharing its reads did not spend computing between
/// two of its own visits.
#[derive(Debug, Default, Clone, Copy)]
struct Visits {
    /// Traced time in the visits' calls so far.
    busy_ns: i64,
    /// The latest end of those calls.
    end_ns: i64,
    /// A visit began before the last one's calls had ended: the rank read
    /// with several readers at once (a loader's workers), whose reading
    /// overlapped its compute, so none of it is taken out of a sharer's
    /// gaps.
    overlapped: bool,
}

/// Where a target rank stood in its source's visits after its last call
/// of one.
#[derive(Debug, Clone, Copy)]
struct Mark {
    busy_ns: i64,
    stretch: u32,
}

/// How much of a writer's budget is spent.
#[derive(Debug, Default, Clone, Copy)]
struct Spent {
    /// Bytes the pattern wrote so far.
    traced: u64,
    /// Bytes this writer wrote so far.
    written: u64,
}

pub struct Router<'m> {
    model: &'m Model,
    /// Dataset visits dealt so far, per source index.
    dealt: Vec<u64>,
    /// The group being dealt, per source index.
    groups: Vec<Group>,
    /// Per phase, its stretch of steps.
    stretches: Vec<u32>,
    held: HashMap<(i32, i32, i32), Held>,
    /// Per (target rank, family) written so far; a family's entries go
    /// when the stream passes its last phase (see
    /// [`super::model::Family::last_phase`]).
    spent: HashMap<(u32, u32), Spent>,
    /// The phase of the latest call routed.
    phase: u16,
    /// Per source index, its visits so far.
    visits: Vec<Visits>,
    /// Per target rank, after its last call of a visit.
    marks: Vec<Option<Mark>>,
}

impl<'m> Router<'m> {
    /// A router for `model`, its groups begun anew at each of `stretches`
    /// (per phase, see [`Survey::stretches`]).
    pub fn new(model: &'m Model, stretches: Vec<u32>) -> Self {
        Router {
            model,
            dealt: vec![0; model.sources.len()],
            groups: vec![Group::default(); model.sources.len()],
            stretches,
            held: HashMap::new(),
            spent: HashMap::new(),
            phase: 0,
            visits: vec![Visits::default(); model.sources.len()],
            marks: vec![None; model.world as usize],
        }
    }

    /// The next dataset visit of source index `s`, begun by `op`: the
    /// target that makes it, and how much earlier (see [`Group`]). A
    /// stretch's first visit begins a group: the job's ranks begin a
    /// stretch together, the first batch's load and the epoch after it
    /// alike.
    fn deal(&mut self, s: usize, op: &PlannedOp) -> (u32, i64) {
        let share = &self.model.shares[s];
        let t = share[(self.dealt[s] % share.len() as u64) as usize];
        self.dealt[s] += 1;
        let stretch = self.stretches.get(op.phase as usize).copied().unwrap_or(0);
        let g = &mut self.groups[s];
        if g.left == 0 || g.stretch != stretch {
            *g = Group {
                stretch,
                first_ns: op.ts,
                left: share.len() as u32,
            };
        }
        g.left -= 1;
        (t, (op.ts - g.first_ns).max(0))
    }

    /// Appends to `out` each target rank that makes `op` (a call of source
    /// rank `source`), with the call as that rank makes it.
    pub fn route(&mut self, source: i32, op: &PlannedOp, out: &mut Vec<(u32, PlannedOp)>) {
        if op.phase > self.phase {
            self.phase = op.phase;
            self.forget_written_families();
        }
        let Some(s) = self.model.source_index(source) else {
            return;
        };
        let key = (source, op.pid, op.fd);
        if op.op != Op::Open && op.fd >= 0 {
            if let Some(Held::Visit(t, earlier)) = self.held.get(&key).copied() {
                if op.op == Op::Close {
                    self.held.remove(&key);
                }
                out.push((t, self.visited(s, t, op, earlier, false)));
                return;
            }
        }
        let role = match self.model.role(op.path) {
            PathRole::Other if op.path2 != NO_PATH => self.model.role(op.path2),
            r => r,
        };
        if let PathRole::Family(f) = role {
            if self.model.families[f as usize].dropped {
                return;
            }
        }
        match role {
            PathRole::Dataset if self.model.data_mode() == DataMode::Shard => {
                let (t, earlier) = self.deal(s, op);
                if op.op == Op::Open && !op.failed && op.fd >= 0 {
                    self.held.insert(key, Held::Visit(t, earlier));
                }
                out.push((t, self.visited(s, t, op, earlier, true)));
            }
            PathRole::Family(f)
                if self.model.families[f as usize].layout != CheckpointLayout::Replicated
                    || self.model.options.checkpoint_bytes.is_some() =>
            {
                self.for_writers(f, source, op, out)
            }
            _ => {
                for &t in &self.model.clones[s] {
                    out.push((t, *op));
                }
            }
        }
    }

    /// `op`, a call of a dataset visit of source index `s` (its first when
    /// `begins`) that target `t` makes `earlier` ns before its traced time,
    /// with what the source spent on the other sharers' visits since `t`'s
    /// last call of one ([`PlannedOp::elsewhere_ns`]). A rank that read
    /// one file after another, computing between, spent that time reading
    /// them: a sharer at N, clocked through the traced gaps between its own
    /// visits, would otherwise count the others' reads as its compute, and
    /// each of its steps would last (k - 1)/k of a traced read longer than
    /// the job's at N.
    fn visited(
        &mut self,
        s: usize,
        t: u32,
        op: &PlannedOp,
        earlier: i64,
        begins: bool,
    ) -> PlannedOp {
        let stretch = self.stretches.get(op.phase as usize).copied().unwrap_or(0);
        let v = &mut self.visits[s];
        v.overlapped |= begins && op.ts < v.end_ns;
        let before = v.busy_ns;
        v.busy_ns += op.dur.max(0);
        v.end_ns = v.end_ns.max(op.ts + op.dur.max(0));
        let mark = Mark {
            busy_ns: v.busy_ns,
            stretch,
        };
        let overlapped = v.overlapped;
        let mut call = moved_earlier(op, earlier);
        if let Some(last) = self.marks[t as usize].replace(mark) {
            if last.stretch == stretch && !overlapped {
                call.elsewhere_ns = before - last.busy_ns;
            }
        }
        call
    }

    /// Drops what the writers spent of families no later phase writes:
    /// the map then holds the saves in progress, not every save so far.
    fn forget_written_families(&mut self) {
        let (families, now) = (&self.model.families, self.phase as usize);
        self.spent
            .retain(|&(_, f), _| families[f as usize].last_phase >= now);
    }

    fn for_writers(
        &mut self,
        f: u32,
        source: i32,
        op: &PlannedOp,
        out: &mut Vec<(u32, PlannedOp)>,
    ) {
        let pattern = self.model.families[f as usize]
            .traced_writers
            .get(&source)
            .copied();
        let Some(pattern_bytes) = pattern else {
            // A rank that wrote none of the family (a look at another
            // rank's file): left out, as that file is not its own at N.
            return;
        };
        for &(t, budget) in self.model.pattern_targets(f, source) {
            if op.op != Op::Write {
                out.push((t, *op));
                continue;
            }
            let spent = self.spent.entry((t, f)).or_default();
            let moved = op.bytes.max(0) as u64;
            let mut call = *op;
            if budget <= pattern_bytes {
                let n = moved.min(budget - spent.written);
                if n == 0 {
                    spent.traced += moved;
                    continue;
                }
                call.bytes = n as i64;
            } else {
                let scale = |b: u64| (b as u128 * budget as u128 / pattern_bytes as u128) as u64;
                let n = scale(spent.traced + moved) - spent.written;
                call.bytes = n as i64;
                if op.offset >= 0 {
                    call.offset = scale(op.offset as u64) as i64;
                }
                if n == 0 {
                    spent.traced += moved;
                    continue;
                }
            }
            spent.traced += moved;
            spent.written += call.bytes as u64;
            out.push((t, call));
        }
    }
}

/// `op` as made `earlier` ns before its traced time.
fn moved_earlier(op: &PlannedOp, earlier: i64) -> PlannedOp {
    PlannedOp {
        ts: op.ts - earlier,
        ..*op
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ops::Via;

    const MS: i64 = 1_000_000;

    fn call(op: Op, ts: i64, dur: i64, pid: i32, fd: i32, path: u32) -> PlannedOp {
        PlannedOp {
            ts,
            dur,
            offset: -1,
            bytes: if op == Op::Read { 4 << 20 } else { 0 },
            pid,
            fd,
            path,
            path2: NO_PATH,
            flags: None,
            op,
            phase: 0,
            failed: false,
            via: Via::Syscall,
            elsewhere_ns: 0,
        }
    }

    /// Six visits (open, a 4 ms read, close), each by process `pid_of(i)`
    /// at `start_of(i)`, routed to 2 ranks: each call's rank and
    /// `elsewhere_ns`.
    fn routed(start_of: impl Fn(i64) -> i64, pid_of: impl Fn(i64) -> i32) -> Vec<(u32, Op, i64)> {
        let model = Model::sharing(2);
        let mut router = Router::new(&model, vec![0]);
        let mut calls: Vec<PlannedOp> = Vec::new();
        for i in 0..6 {
            let (t, pid) = (start_of(i), pid_of(i));
            calls.push(call(Op::Open, t, MS / 10, pid, 3, i as u32));
            calls.push(call(Op::Read, t + MS / 10, 4 * MS, pid, 3, i as u32));
            calls.push(call(
                Op::Close,
                t + 4 * MS + MS / 10,
                MS / 10,
                pid,
                3,
                i as u32,
            ));
        }
        calls.sort_by_key(|c| c.ts);
        let mut out = Vec::new();
        for c in &calls {
            router.route(0, c, &mut out);
        }
        out.iter()
            .map(|(t, c)| (*t, c.op, c.elsewhere_ns))
            .collect()
    }

    #[test]
    fn a_sharer_of_one_reader_does_not_take_the_others_reads_for_compute() {
        // One file after another, 20 ms of compute after each.
        let out = routed(|i| i * 25 * MS, |_| 7);
        let visit = 4 * MS + 2 * MS / 10;
        // A visit's own read and close follow its open at once.
        assert!(out.iter().all(|c| c.1 == Op::Open || c.2 == 0), "{out:?}");
        let opens: Vec<(u32, i64)> = out
            .iter()
            .filter(|c| c.1 == Op::Open)
            .map(|c| (c.0, c.2))
            .collect();
        // Each rank's first visit of the stretch has no one's before it;
        // every later one follows one visit of the other rank's.
        assert_eq!(
            opens,
            [
                (0, 0),
                (1, 0),
                (0, visit),
                (1, visit),
                (0, visit),
                (1, visit)
            ]
        );
    }

    #[test]
    fn readers_at_once_leave_the_gaps_as_traced() {
        // Two workers, each reading a file every 10 ms, 2 ms apart: their
        // reading overlaps, and with it the consumer's compute.
        let out = routed(
            |i| (i / 2) * 10 * MS + (i % 2) * 2 * MS,
            |i| 7 + (i % 2) as i32,
        );
        assert!(out.iter().all(|c| c.2 == 0), "{out:?}");
    }
}
