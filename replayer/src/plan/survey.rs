//! The first pass over the trace: which ranks exist, which files are read (and
//! how far) or written, how many ops each rank replays, and the phases. It
//! streams batches and keeps only per-file and per-phase state, so its memory
//! grows with the number of files, never with the number of events.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use iorepro_analysis::activity::{Activity, Caller, Runs};
use iorepro_analysis::phases::{self, Phase, PhaseKind};
use iorepro_analysis::roles::RolesBuilder;
use iorepro_analysis::roles::{FileRoles, Role as FileRole};
use iorepro_format::columns::PerPath;
use iorepro_format::processes::{Forks, ProcessStart};
use iorepro_format::schema::{
    COL_CALLS, COL_DUR_NS, COL_FD, COL_FLAGS, COL_HOST, COL_METHOD, COL_OFFSET, COL_OP, COL_PATH,
    COL_PATH2, COL_PATH2_TRAITS, COL_PATH_TRAITS, COL_PID, COL_RANK, COL_READAHEAD_BYTES,
    COL_RECEIVED, COL_RET, COL_SENT, COL_SIZE, COL_SPAN_NS, COL_STATUS, COL_STORAGE_BYTES, COL_TS,
    COL_VIA,
};
use iorepro_format::{Events, Op, TraceReader};

use crate::error::ReplayResult;
use crate::plan::meetings::{Meetings, ReadTimes};
use crate::plan::pathforms;
use crate::plan::presence::{self, Presence, Role};
use crate::plan::save_time::{self, SaveTime};
use crate::plan::scope::{LeftOut, LeftOutCount, Scope, Skip};

/// The columns the replayer reads (the rest are never decoded); an
/// anonymized trace's `path_traits` for the roles.
pub const REPLAY_COLUMNS: [&str; 18] = [
    COL_TS,
    COL_DUR_NS,
    COL_HOST,
    COL_RANK,
    COL_PID,
    COL_OP,
    COL_PATH,
    COL_FD,
    COL_OFFSET,
    COL_SIZE,
    COL_RET,
    COL_FLAGS,
    COL_CALLS,
    COL_SPAN_NS,
    COL_PATH2,
    COL_VIA,
    COL_PATH_TRAITS,
    COL_PATH2_TRAITS,
];

#[derive(Debug, Clone, Default)]
pub struct PathInfo {
    pub path: Arc<str>,
    /// Bytes a reader needs the file to hold (largest `offset + bytes` of a read).
    pub read_extent: u64,
    /// Changed somewhere in the trace (written, truncated, created, renamed,
    /// linked to, unlinked, removed), or beneath a directory that was: each
    /// target rank has its own copy.
    pub written: bool,
    /// Source ranks that read it.
    pub readers: RankSet,
    /// Source ranks that name it in any call.
    pub users: RankSet,
    /// Whether it existed when the traced job began.
    pub presence: Presence,
    /// A directory: listed, created or removed as one, or holding another
    /// path of the trace.
    pub is_dir: bool,
    /// A directory holding a path that ranks change, so each of those
    /// ranks needs one of its own.
    pub holds_changed: bool,
    /// The job's role for it (see [`iorepro_analysis::roles`]).
    pub role: Option<iorepro_analysis::roles::Role>,
    /// Why the replay leaves its calls out, if it does (see [`crate::plan::scope`]).
    pub skip: Option<Skip>,
    /// Left out itself, but a directory holding paths the replay keeps.
    pub keeps: bool,
    /// Calls naming it first (what leaving it out leaves out).
    pub calls: u64,
    /// What its first telling call found it to be (true: a directory).
    first_form: Option<bool>,
    /// A path beneath it was found (a call on it did not fail with ENOTDIR).
    holds_found: bool,
    /// A call on it did not fail with ENOTDIR. When all did, a file on its
    /// way was probed as a directory, which makes no directory of it.
    found: bool,
}

/// Distinct source ranks. A rank below 64 is a bit: every row adds its
/// rank to its path's sets, and a bit costs no search and no look-up
/// elsewhere in memory (with 100,000 files, each set's own allocation was
/// a cache miss a row). Other ranks are kept sorted beside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RankSet {
    low: u64,
    others: Vec<i32>,
}

impl RankSet {
    pub fn add(&mut self, rank: i32) {
        match u32::try_from(rank) {
            Ok(bit) if bit < 64 => self.low |= 1 << bit,
            _ => {
                if let Err(at) = self.others.binary_search(&rank) {
                    self.others.insert(at, rank);
                }
            }
        }
    }

    pub fn contains(&self, rank: i32) -> bool {
        match u32::try_from(rank) {
            Ok(bit) if bit < 64 => self.low & (1 << bit) != 0,
            _ => self.others.binary_search(&rank).is_ok(),
        }
    }

    /// The ranks in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = i32> + '_ {
        let below = self.others.iter().copied().take_while(|&r| r < 0);
        let bits = (0..64).filter(|&b| self.low & (1u64 << b) != 0);
        let above = self.others.iter().copied().filter(|&r| r >= 64);
        below.chain(bits).chain(above)
    }
}

impl PathInfo {
    /// What one call tells about the path.
    fn observe(
        &mut self,
        op: Op,
        role: Role,
        ret: i64,
        flags: Option<i32>,
        rank: i32,
        names_dir: bool,
    ) {
        self.users.add(rank);
        self.written |= presence::changes(op, role, ret, flags);
        if self.first_form.is_none() && role == Role::First {
            self.first_form = pathforms::form_shown(op, ret, flags, names_dir);
        }
        self.found |= ret != -(libc::ENOTDIR as i64);
        if self.presence == Presence::Unknown {
            if let Some(p) = presence::judge(op, role, ret, flags) {
                self.presence = p;
            }
        }
    }
}

#[derive(Debug, Default)]
pub struct Survey {
    pub sources: Vec<i32>,
    /// The source ranks that made calls, gathered row by row.
    seen_sources: RankSet,
    pub paths: Vec<PathInfo>,
    pub path_ids: HashMap<Arc<str>, u32>,
    /// Each spelling the rows used, with the path id and form it stands for:
    /// most rows spell a path as an earlier row did, and putting it in
    /// canonical form again costs more than the rest of the row.
    spelled: FxHashMap<Box<str>, (u32, bool)>,
    pub phases: Vec<Phase>,
    /// The ranks' usual pause between bursts of reading in the read phases,
    /// in seconds: a step's compute (0 when the trace shows none).
    pub step_compute_s: f64,
    /// Per phase, what a checkpoint's traced time is made of besides its
    /// bytes reaching the storage (all zero for the other phases).
    pub saves: Vec<SaveTime>,
    pub start_ns: i64,
    pub end_ns: i64,
    pub events: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// The largest single read or write, so workers size their buffers once
    /// up front instead of growing (and filling) them inside a timed phase.
    pub max_io_bytes: u64,
    /// The largest single write (whether writes need private copies).
    pub max_write_bytes: u64,
    /// The largest traced PUT of an object (see [`crate::plan::requests_as_calls`]):
    /// a bucket target sends it as one request, from one buffer.
    pub max_put_bytes: u64,
    /// Every file's role in the job.
    pub roles: FileRoles,
    /// What the replay leaves out (set by [`apply_scope`]).
    pub left_out: LeftOut,
    /// Whether the traced ranks met at their saves.
    pub meetings: Meetings,
    /// When ranks read, for [`Survey::meetings`] (taken when it is judged).
    read_times: ReadTimes,
    /// fsync and fdatasync calls: where a save waited for the storage to
    /// take what its writes left in the page cache (see [`SaveTime`]).
    flushes: Runs,
    /// When each traced process made its first call, by source rank and
    /// pid: where its start-up ends (see [`crate::plan::timing::Schedule::start_of_process`]);
    /// and the host it ran on.
    process_starts: FxHashMap<(i32, i32), FirstCall>,
    /// When each traced process was forked, by source rank and pid, where
    /// the trace records it (see [`iorepro_format::processes`]).
    process_forks: HashMap<(i32, i32), i64>,
    /// When each source rank's first process made its first call.
    rank_starts: HashMap<i32, i64>,
}

/// A traced process's first call, and its host.
#[derive(Debug, Clone)]
struct FirstCall {
    ts: i64,
    host: Arc<str>,
}

/// Rows without a rank (a trace of one untagged process) replay as rank 0.
pub fn rank_or_zero(ev: &Events, row: usize) -> i32 {
    Events::opt_i32(ev.rank(), row).unwrap_or(0)
}

/// The trace with the columns the replay reads: [`REPLAY_COLUMNS`], and a
/// request's where it may hold requests (see [`crate::plan::requests_as_calls`]).
pub fn open_reader(trace: &Path) -> ReplayResult<TraceReader> {
    let reader = TraceReader::open(trace)?;
    let mut columns = REPLAY_COLUMNS.to_vec();
    if reader.may_hold_requests() {
        columns.extend([COL_METHOD, COL_STATUS, COL_SENT, COL_RECEIVED]);
    }
    if reader.may_hold_storage() {
        columns.extend([COL_STORAGE_BYTES, COL_READAHEAD_BYTES]);
    }
    Ok(reader.with_columns(&columns).with_path_keys())
}

impl Survey {
    /// Whether the replay's ranks meet at the start and end of phase `i`: a
    /// save replayed (`selected`, by `--phases`) at which the traced ranks
    /// met (see [`crate::plan::meetings`]).
    pub fn ranks_meet_at(&self, i: usize, selected: &[bool]) -> bool {
        self.phases[i].kind == PhaseKind::Checkpoint && selected[i] && self.meetings.met_at(i)
    }

    /// A phase in which ranks make their steps: a load or read phase, or a
    /// save the traced ranks read on through.
    pub fn has_steps(&self, i: usize) -> bool {
        match self.phases[i].kind {
            PhaseKind::Load | PhaseKind::Read => true,
            PhaseKind::Checkpoint => !self.meetings.met_at(i),
            _ => false,
        }
    }

    /// Per phase, the stretch of steps it belongs to: phases in a row in
    /// which ranks make steps are one stretch (the first batch's load and
    /// the epoch read after it, say). The job's ranks begin a stretch
    /// together: at the start, after a save they met at (no steps), after
    /// a pause in reading.
    pub fn stretches(&self) -> Vec<u32> {
        let mut stretch = 0;
        (0..self.phases.len())
            .map(|i| {
                if i > 0 && !(self.has_steps(i - 1) && self.has_steps(i)) {
                    stretch += 1;
                }
                stretch
            })
            .collect()
    }

    /// When traced process `pid` of source rank `rank` made its first call.
    pub fn process_start(&self, rank: i32, pid: i32) -> Option<i64> {
        self.process_starts.get(&(rank, pid)).map(|f| f.ts)
    }

    /// When traced process `pid` of source rank `rank` was forked, where
    /// the trace records it.
    pub fn process_fork(&self, rank: i32, pid: i32) -> Option<i64> {
        self.process_forks.get(&(rank, pid)).copied()
    }

    /// When source rank `rank`'s first process made its first call: the
    /// start of the job's own start-up on that rank.
    pub fn rank_start(&self, rank: i32) -> Option<i64> {
        self.rank_starts.get(&rank).copied()
    }

    /// Each traced process's fork from the manifest's starts: the latest
    /// fork of its pid on its host before its first call.
    fn find_forks(&mut self, starts: &[ProcessStart]) {
        if starts.is_empty() {
            return;
        }
        let forks = Forks::new(starts);
        self.process_forks = self
            .process_starts
            .iter()
            .filter_map(|(&key, first)| Some((key, forks.before(&first.host, key.1, first.ts)?)))
            .collect();
    }

    /// Settles what the calls alone could not: paths beneath a directory
    /// that ranks change are the ranks' own too (a probe for a missing file
    /// in a directory the job made looks in the rank's copy, where that
    /// directory is); paths that hold another path are directories; the
    /// directory of each path ranks change is one they need.
    fn settle_paths(&mut self) {
        let changed: Vec<bool> = self.paths.iter().map(|p| p.written).collect();
        for i in 0..self.paths.len() {
            let path = self.paths[i].path.clone();
            let found = self.paths[i].found;
            for parent in Path::new(&*path).ancestors().skip(1) {
                let Some(id) = parent.to_str().and_then(|p| self.path_ids.get(p)) else {
                    continue;
                };
                let id = *id as usize;
                self.paths[id].holds_found |= found;
                if changed[id] {
                    self.paths[i].written = true;
                }
            }
        }
        for i in 0..self.paths.len() {
            if !self.paths[i].written {
                continue;
            }
            let path = self.paths[i].path.clone();
            let Some(parent) = Path::new(&*path).parent().and_then(|p| p.to_str()) else {
                continue;
            };
            let users = self.paths[i].users.clone();
            let id = self.path_id(parent) as usize;
            let dir = &mut self.paths[id];
            dir.holds_found = true;
            dir.holds_changed = true;
            for r in users.iter() {
                dir.users.add(r);
            }
        }
        // A path is what its first telling call found; without one, a
        // directory when a path beneath it was found.
        for p in &mut self.paths {
            p.is_dir = p.first_form.unwrap_or(p.holds_found);
        }
    }

    /// The id of a traced path, interned on first sight under its one
    /// spelling (`d/./f`, `d/x/../f` and `d//f` are `d/f`; `d/`, `d/.` are
    /// `d`), and whether this spelling can only name a directory.
    pub fn path_id(&mut self, path: &str) -> u32 {
        self.intern(path).0
    }

    fn intern(&mut self, spelled: &str) -> (u32, bool) {
        if let Some(&known) = self.spelled.get(spelled) {
            return known;
        }
        let (path, names_dir) = pathforms::spelling(spelled);
        let id = match self.path_ids.get(&*path) {
            Some(&id) => id,
            None => {
                let id = self.paths.len() as u32;
                let p: Arc<str> = Arc::from(&*path);
                self.paths.push(PathInfo {
                    path: p.clone(),
                    ..Default::default()
                });
                self.path_ids.insert(p, id);
                id
            }
        };
        self.spelled.insert(spelled.into(), (id, names_dir));
        (id, names_dir)
    }

    /// A path the survey has seen, however the row spells it: its id and
    /// whether the replay leaves it out.
    pub fn known(&self, path: &str) -> Option<Known> {
        self.find_path(path).map(|id| Known {
            id,
            skipped: self.paths[id as usize].skip.is_some(),
        })
    }

    /// The id of a path the survey has seen, however the row spells it.
    pub fn find_path(&self, path: &str) -> Option<u32> {
        match self.spelled.get(path) {
            Some(&(id, _)) => Some(id),
            None => self.path_ids.get(&*pathforms::spelling(path).0).copied(),
        }
    }

    pub fn run(trace: &Path) -> ReplayResult<Survey> {
        let reader = open_reader(trace)?;
        let mut s = Survey {
            start_ns: i64::MAX,
            end_ns: i64::MIN,
            ..Default::default()
        };
        let mut activity = Activity::default();
        let mut roles = RolesBuilder::default();
        let mut ids = PerPath::default();
        for ev in crate::plan::requests_as_calls::replay_events(&reader)? {
            let ev = ev?;
            for (row, &op) in ev.ops().iter().enumerate() {
                roles.observe(&ev, row);
                s.observe_row(&ev, row, op, &mut activity, &mut ids);
            }
        }
        // The phases are found first and the run lists only they needed
        // (name-space calls, the storage's bytes) dropped before the roles
        // are judged: on a long trace both at once were the plan's peak of
        // memory.
        activity.finish();
        let detected = phases::detect(&activity);
        let runs = SaveRuns {
            reads: activity.reads,
            writes: activity.writes,
            syncs: activity.syncs,
        };
        s.roles = roles.finish();
        s.find_forks(&reader.manifest().process_starts);
        for (&(rank, _), first) in &s.process_starts {
            let start = s.rank_starts.entry(rank).or_insert(first.ts);
            *start = (*start).min(first.ts);
        }
        if let Some(m) = &reader.manifest().mounts {
            s.roles.assign_mounts(&iorepro_format::MountTable::new(m));
        }
        s.settle(detected, runs);
        Ok(s)
    }

    /// One row: its time, its bytes, its rank's calls, its path(s), and
    /// what the phase detector needs of it. `ids` keeps each path's id and
    /// spelling (see [`Survey::intern`]).
    fn observe_row(
        &mut self,
        ev: &Events,
        row: usize,
        op: Op,
        activity: &mut Activity,
        ids: &mut PerPath<(u32, bool)>,
    ) {
        let t = ev.ts().value(row);
        // A run of calls lasts its span; its calls are counted one by one.
        let end = t + ev.dur_ns().value(row).max(ev.span_at(row)).max(0);
        let calls = ev.calls_at(row) as u64;
        self.start_ns = self.start_ns.min(t);
        self.end_ns = self.end_ns.max(end);
        self.events += calls;
        let r = ev.ret().value(row);
        let rank = rank_or_zero(ev, row);
        self.seen_sources.add(rank);
        self.process_starts
            .entry((rank, ev.pid().value(row)))
            .and_modify(|first| first.ts = first.ts.min(t))
            .or_insert_with(|| FirstCall {
                ts: t,
                host: Arc::from(ev.host_at(row)),
            });
        let bytes = if r > 0 && op.moves_data() {
            r as u64
        } else {
            0
        };
        let caller = Caller {
            rank: Events::opt_i32(ev.rank(), row),
            pid: ev.pid().value(row),
        };
        activity.observe_row(t, end - t, op, r, caller, calls);
        if r > 0 && op.reads_file() {
            self.read_times.observe(rank, t, end);
            // What the traced storage served of it, for `--cache`.
            if let Some(f) = ev.from_storage_at(row) {
                activity.observe_storage(t, end, f.bytes);
            }
        }
        if matches!(op, Op::Fsync | Op::Fdatasync) {
            self.flushes.add(t, end, 0, None);
        }
        if r >= 0 {
            self.count_bytes(ev, row, op, bytes, calls);
        }
        let flags = Events::opt_i32(ev.flags(), row);
        let fd = Events::opt_i32(ev.fd(), row);
        let named = ev
            .path_at(row)
            .is_some_and(|p| !pathforms::on_descriptor(p, op, fd));
        if named {
            let (id, names_dir) = ids
                .get(ev, row, |p| self.intern(p))
                .expect("a row with a path");
            let info = &mut self.paths[id as usize];
            info.observe(op, Role::First, r, flags, rank, names_dir);
            info.calls += calls;
            if r >= 0 && op.reads_file() {
                let off = Events::opt_i64(ev.offset(), row).unwrap_or(0).max(0) as u64;
                info.read_extent = info.read_extent.max(off + bytes);
                info.readers.add(rank);
            }
        }
        if let Some(path2) = ev.path2_at(row) {
            let (id, names_dir) = self.intern(path2);
            let info = &mut self.paths[id as usize];
            info.observe(op, Role::Second, r, flags, rank, names_dir);
        }
    }

    /// A successful call's bytes, and the largest buffer a call needs.
    fn count_bytes(&mut self, ev: &Events, row: usize, op: Op, bytes: u64, calls: u64) {
        match op {
            Op::Read => self.read_bytes += bytes,
            Op::Write => self.write_bytes += bytes,
            _ => return,
        }
        let requested = Events::opt_i64(ev.size(), row).unwrap_or(0).max(0) as u64;
        // The buffer a call needs: a run's calls are equal parts.
        let call = (bytes / calls).max(requested / calls);
        self.max_io_bytes = self.max_io_bytes.max(call);
        if op == Op::Write {
            self.max_write_bytes = self.max_write_bytes.max(call);
            if ev.via_at(row) == Some(crate::plan::requests_as_calls::VIA_REQUEST) {
                self.max_put_bytes = self.max_put_bytes.max(call);
            }
        }
    }

    /// After the last row: the paths settled, the source ranks and the
    /// phases (a trace without calls replays as one idle phase).
    fn settle(&mut self, detected: Vec<Phase>, runs: SaveRuns) {
        self.settle_paths();
        if self.events == 0 {
            self.start_ns = 0;
            self.end_ns = 0;
        }
        self.sources = self.seen_sources.iter().collect();
        if self.sources.is_empty() {
            self.sources.push(0);
        }
        self.phases = phases::as_the_job_ran(
            detected,
            runs.reads.runs(),
            self.roles.first_data_ns(),
            &self.roles.checkpoints_named(),
        );
        if self.phases.is_empty() {
            self.phases.push(Phase {
                kind: PhaseKind::Idle,
                start_s: 0.0,
                end_s: 0.0,
                read_bytes: 0,
                write_bytes: 0,
                max_writers: 0,
                metadata_calls: 0,
                storage_read_bytes: None,
                start_unix_ns: self.start_ns,
                end_unix_ns: self.end_ns.max(self.start_ns + 1),
            });
        }
        // What of each save's time the storage's speed does not change,
        // measured once here for the scaling model.
        drop(runs.reads);
        let (writes, syncs) = (runs.writes.runs(), runs.syncs.runs());
        self.flushes.finish();
        let flushes = self.flushes.runs();
        self.saves = save_time::per_phase(&self.phases, writes, syncs, flushes);
        let reads = std::mem::take(&mut self.read_times).finish();
        self.step_compute_s = reads.step_pause_ns(&self.phases).unwrap_or(0) as f64 / 1e9;
        self.meetings = Meetings::judge(&self.phases, &reads, &runs.writes);
    }
}

/// What of the trace's activity the plan keeps past finding the phases:
/// the reads (where a save began), and the writes and syncs (what a save's
/// time is made of, whether the ranks met at it).
struct SaveRuns {
    reads: Runs,
    writes: Runs,
    syncs: Runs,
}

impl Survey {
    /// The phases as an epoch is timed: the one in which the job made its
    /// first data call begins there, what came before it in that phase
    /// being start-up (imports, a loader's workers starting), as the
    /// replay's report leaves it out of the first epoch.
    pub fn phases_from_first_data(&self) -> Vec<Phase> {
        let mut phases = self.phases.clone();
        if let Some(first) = self.roles.first_data_ns() {
            if let Some(p) = phases.iter_mut().find(|p| p.holds(first)) {
                p.start_s += (first - p.start_unix_ns) as f64 / 1e9;
                p.start_unix_ns = first;
            }
        }
        phases
    }
}

/// The path id of no path: a call on a descriptor, or one that names none.
pub const NO_PATH: u32 = u32::MAX;

/// Decides every path of the survey and counts what is left out.
pub fn apply_scope(survey: &mut Survey, scope: &Scope) -> LeftOut {
    let mut left = LeftOut {
        scope: scope.describe(),
        ..Default::default()
    };
    for i in 0..survey.paths.len() {
        let path = survey.paths[i].path.clone();
        let entry = survey.roles.get(&path);
        let role = entry.map_or_else(|| survey.roles.role(&path), |f| f.role);
        let (read_bytes, write_bytes) = entry.map_or((0, 0), |f| (f.read_bytes, f.write_bytes));
        let skip = scope.decide(&path, role);
        let info = &mut survey.paths[i];
        info.role = Some(role);
        info.skip = skip;
        let Some(skip) = skip else { continue };
        let t = LeftOutCount {
            files: 1,
            calls: info.calls,
            read_bytes,
            write_bytes,
        };
        left.total.add(&t);
        left.roles.entry(role.to_string()).or_default().add(&t);
        left.reasons.entry(skip.key()).or_default().add(&t);
        let mount = survey.roles.mount_of(&path).to_string();
        left.mounts.entry(mount).or_default().add(&t);
    }
    // Directories on the way to what is kept are still made.
    for i in 0..survey.paths.len() {
        if survey.paths[i].skip.is_some() {
            continue;
        }
        let path = survey.paths[i].path.clone();
        for parent in Path::new(&*path).ancestors().skip(1) {
            if let Some(&id) = parent.to_str().and_then(|p| survey.path_ids.get(p)) {
                let p = &mut survey.paths[id as usize];
                if p.skip.is_some() {
                    p.keeps = true;
                }
            }
        }
    }
    left
}

/// Refuses a trace that holds no calls, or that is marked incomplete (its
/// writer never closed it, or a repair found segments missing), unless
/// allowed: a replay of what is not there would pass silently.
pub fn check_usable(
    trace: &Path,
    survey: &Survey,
    allow_incomplete: bool,
) -> crate::error::ReplayResult<()> {
    if allow_incomplete {
        return Ok(());
    }
    let why = if survey.events == 0 {
        Some("it holds no calls".to_string())
    } else {
        let reader = iorepro_format::TraceReader::open(trace)?;
        (!reader.manifest().complete).then(|| {
            "its manifest marks it incomplete (complete: false; its writer did not finish, \
             or a repair found segments missing), so calls may be missing"
                .to_string()
        })
    };
    match why {
        Some(why) => Err(crate::error::ReplayError::Usage(format!(
            "refusing to replay {}: {why}; --allow-incomplete replays it anyway",
            trace.display()
        ))),
        None => Ok(()),
    }
}

/// Whether every replica reads one copy of a path: the read-only files of
/// code, system and other roles (a thousand ranks importing one Python
/// environment import the same files), prepared once. A dataset keeps one
/// copy per replica, so replicas do not read what another pulled into a
/// cache.
pub fn shared_by_replicas(info: &PathInfo) -> bool {
    !info.written
        && matches!(
            info.role,
            Some(FileRole::Code | FileRole::System | FileRole::Launcher | FileRole::Other)
        )
}

/// What the survey knows of a path a row names (see [`Survey::known`]).
#[derive(Debug, Clone, Copy)]
pub struct Known {
    pub id: u32,
    /// The replay leaves its calls out ([`PathInfo::skip`]).
    pub skipped: bool,
}

/// The path ids a row's calls are made on ([`NO_PATH`] for
/// none, or for a call on a descriptor); `None` when the row is left out.
/// `path` comes with what [`Survey::known`] says of it, which the caller
/// may have kept per distinct path.
pub fn row_paths(
    survey: &Survey,
    op: iorepro_format::Op,
    fd: Option<i32>,
    path: Option<(&str, Option<Known>)>,
    path2: Option<&str>,
) -> Option<(u32, u32)> {
    let id = |p: Option<(&str, Option<Known>)>| -> Option<u32> {
        let Some((p, known)) = p else {
            return Some(NO_PATH);
        };
        if crate::plan::pathforms::on_descriptor(p, op, fd) {
            return Some(NO_PATH);
        }
        match known {
            Some(Known { skipped: true, .. }) => None,
            Some(Known { id, .. }) => Some(id),
            None => Some(NO_PATH),
        }
    };
    let path2 = path2.map(|p| (p, survey.known(p)));
    Some((id(path)?, id(path2)?))
}

#[cfg(test)]
mod tests {
    use super::RankSet;

    #[test]
    fn a_rank_set_holds_each_rank_once_in_ascending_order() {
        let mut set = RankSet::default();
        for r in [5, 63, -1, 64, 0, 5, 4095, 64, -7, 63] {
            set.add(r);
        }
        assert_eq!(set.iter().collect::<Vec<_>>(), [-7, -1, 0, 5, 63, 64, 4095]);
        for r in [-7, -1, 0, 5, 63, 64, 4095] {
            assert!(set.contains(r), "{r}");
        }
        for r in [-2, 1, 62, 65, 4096] {
            assert!(!set.contains(r), "{r}");
        }
    }
}
