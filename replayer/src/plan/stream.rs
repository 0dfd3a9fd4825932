//! The second pass over the trace: each row becomes a compact [`PlannedOp`]
//! tagged with its phase ([`crate::plan::ops`]) and is sent to the local
//! target ranks the scaling model ([`crate::plan::scale`]) gives it,
//! through bounded channels.
//!
//! One reader feeds all local ranks, in `ts` order, in chunks. Ranks meet at
//! phase barriers, and the scaling model gives them different streams (one
//! writer of a file, the others none), so a rank can fill its channel with
//! ops of the next phase and wait at its barrier while a rank it waits for
//! still needs ops the reader holds. Two rules make bounded channels safe:
//! at each phase boundary of the stream the reader sends every rank what it
//! holds for it, and tells every rank, even one with no ops in the new
//! phase, that the phase began ([`Chunk::then_phase`]). So when the reader
//! blocks on a full channel, every rank holds all its ops of the phases
//! before and knows where the stream is, and the ranks a barrier waits for
//! can always reach it. Memory stays at `CHUNK * CHANNEL_CHUNKS` ops per
//! rank however long the trace is.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::SyncSender;

use crate::error::ReplayResult;
use crate::plan::ops::{for_each_op, PlannedOp};
use crate::plan::scale::Router;
use crate::plan::survey::Survey;

/// Ops per message.
pub const CHUNK: usize = 1024;
/// Messages a rank's channel holds before the reader waits for it.
pub const CHANNEL_CHUNKS: usize = 4;

/// What the reader sends a rank: its next ops in `ts` order, after which
/// the stream is at phase `then_phase` (a rank moves on to it, through its
/// barriers, even when it has no op there).
#[derive(Debug, Default)]
pub struct Chunk {
    pub ops: Vec<PlannedOp>,
    pub then_phase: u16,
}

/// Streams the trace to the local target ranks, each op to the ranks the
/// scaling model's [`Router`] gives it. A rank whose receiver is gone (it
/// failed) is skipped; the others still get all their ops.
pub fn dispatch(
    trace: &Path,
    survey: &Survey,
    router: &mut Router,
    phase_selected: &[bool],
    targets: Vec<(u32, SyncSender<Chunk>)>,
) -> ReplayResult<()> {
    let local: HashMap<u32, usize> = targets
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (*t, i))
        .collect();
    let mut pending: Vec<Vec<PlannedOp>> =
        targets.iter().map(|_| Vec::with_capacity(CHUNK)).collect();
    let mut alive = vec![true; targets.len()];
    let mut phase = 0u16;
    // Sends rank `i` what the reader holds for it; the stream is at `phase`.
    let send = |i: usize, ops: Vec<PlannedOp>, then_phase: u16, alive: &mut [bool]| {
        if alive[i] {
            alive[i] = targets[i].1.send(Chunk { ops, then_phase }).is_ok();
        }
    };
    let mut routed = Vec::new();
    for_each_op(trace, survey, phase_selected, |source, planned| {
        if planned.phase > phase {
            // A phase boundary: every rank gets what it has of the phases
            // before, and learns that the next one began.
            phase = planned.phase;
            for (i, ops) in pending.iter_mut().enumerate() {
                send(i, std::mem::take(ops), phase, &mut alive);
            }
        }
        routed.clear();
        router.route(source, &planned, &mut routed);
        for &(t, op) in &routed {
            let Some(&i) = local.get(&t) else { continue };
            if !alive[i] {
                continue;
            }
            pending[i].push(op);
            if pending[i].len() >= CHUNK {
                let ops = std::mem::replace(&mut pending[i], Vec::with_capacity(CHUNK));
                send(i, ops, phase, &mut alive);
            }
        }
    })?;
    for (i, ops) in pending.into_iter().enumerate() {
        if !ops.is_empty() {
            send(i, ops, phase, &mut alive);
        }
    }
    Ok(())
}
