//! Turns a checked [`Workload`] into rows: each rank's load, steps and
//! checkpoints on a simulated clock, emitted in time order.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use iorepro_format::error::TraceResult;
use iorepro_format::event::{EventRow, OwnedRow};
use iorepro_format::schema::Op;

use super::{Checkpoint, Workload};

/// One rank's identity and file cursor while generating.
struct RankState {
    pid: i32,
    next_fd: i32,
    file: u32,
    offset: u64,
}

pub(super) struct Generator<'w> {
    w: &'w Workload,
    rng: SmallRng,
    ranks: Vec<RankState>,
    now: i64,
    step_rows: Vec<Row>,
}

/// A row with owned strings and its command name, buffered for one step
/// (one step is small).
type Row = (&'static str, OwnedRow<String>);

const O_RDONLY: i32 = 0;
const O_WRONLY_CREAT_TRUNC: i32 = 0o1 | 0o100 | 0o1000;

impl<'w> Generator<'w> {
    pub(super) fn new(w: &'w Workload) -> Self {
        let ranks = (0..w.ranks)
            .map(|r| RankState {
                pid: 1000 + r as i32 * 100,
                next_fd: 10,
                file: r % w.files,
                offset: 0,
            })
            .collect();
        Generator {
            w,
            rng: SmallRng::seed_from_u64(w.seed),
            ranks,
            now: w.start_unix_ns,
            step_rows: Vec::new(),
        }
    }

    fn io_ns(&mut self, bytes: u64, bps: f64) -> i64 {
        let base = self.w.latency_ns as f64 + bytes as f64 / bps * 1e9;
        (base * self.rng.random_range(0.9..1.1)) as i64
    }

    pub(super) fn run(
        mut self,
        emit: &mut dyn FnMut(&EventRow<'_>) -> TraceResult<()>,
    ) -> TraceResult<()> {
        if let Some((bytes, rs, path)) = self.w.load.clone() {
            self.phase(|g, r, t| g.load_rank(r, t, bytes, rs, &path));
            self.flush(emit)?;
        }
        for step in 0..self.w.steps {
            self.phase(|g, r, t| g.step_rank(r, t, step));
            self.flush(emit)?;
            if let Some(c) = self.w.checkpoint.clone() {
                if (step + 1) % c.every == 0 {
                    self.phase(|g, r, t| g.checkpoint_rank(r, t, step + 1, &c));
                    self.flush(emit)?;
                }
            }
        }
        Ok(())
    }

    /// Runs `f` for every rank from a common start; the phase ends when the
    /// slowest rank is done (ranks meet there, as at an all-reduce or barrier).
    fn phase(&mut self, mut f: impl FnMut(&mut Self, usize, i64) -> i64) {
        let start = self.now;
        let mut end = start;
        for r in 0..self.ranks.len() {
            let skew = self.rng.random_range(0..20_000);
            end = end.max(f(self, r, start + skew));
        }
        self.now = end + 1_000;
    }

    fn flush(&mut self, emit: &mut dyn FnMut(&EventRow<'_>) -> TraceResult<()>) -> TraceResult<()> {
        self.step_rows.sort_by_key(|(_, r)| r.ts_ns);
        let host = self.w.host.clone();
        for (comm, r) in self.step_rows.drain(..) {
            emit(&r.as_event(&host, comm))?;
        }
        Ok(())
    }

    /// A row of an op that moves no data (close, fsync): no offset, size
    /// or flags, returning 0.
    #[allow(clippy::too_many_arguments)]
    fn no_data_row(
        &mut self,
        rank: usize,
        pid: i32,
        comm: &'static str,
        ts: i64,
        dur: i64,
        op: Op,
        path: &str,
        fd: i32,
    ) {
        self.row(rank, pid, comm, ts, dur, op, path, fd, None, None, 0, None);
    }

    #[allow(clippy::too_many_arguments)]
    fn row(
        &mut self,
        rank: usize,
        pid: i32,
        comm: &'static str,
        ts: i64,
        dur: i64,
        op: Op,
        path: &str,
        fd: i32,
        offset: Option<i64>,
        size: Option<i64>,
        ret: i64,
        flags: Option<i32>,
    ) {
        let row = OwnedRow {
            ts_ns: ts,
            dur_ns: dur,
            pid,
            tid: pid,
            rank: Some((self.w.first_rank as usize + rank) as i32),
            op,
            path: Some(path.to_string()),
            fd: Some(fd),
            offset,
            size,
            ret,
            flags,
            calls: 1,
            span_ns: None,
            path2: None,
            via: None,
            exchange: None,
            from_storage: None,
        };
        self.step_rows.push((comm, row));
    }

    fn load_rank(&mut self, r: usize, mut t: i64, bytes: u64, rs: u64, path: &str) -> i64 {
        let pid = self.ranks[r].pid;
        let fd = 5;
        self.row(
            r,
            pid,
            "python",
            t,
            20_000,
            Op::Open,
            path,
            fd,
            None,
            None,
            fd as i64,
            Some(O_RDONLY),
        );
        t += 20_000;
        let mut off = 0u64;
        while off < bytes {
            let n = rs.min(bytes - off);
            let d = self.io_ns(n, self.w.read_bps);
            self.row(
                r,
                pid,
                "python",
                t,
                d,
                Op::Read,
                path,
                fd,
                Some(off as i64),
                Some(n as i64),
                n as i64,
                None,
            );
            t += d;
            off += n;
        }
        self.no_data_row(r, pid, "python", t, 5_000, Op::Close, path, fd);
        t + 5_000
    }

    fn step_rank(&mut self, r: usize, mut t: i64, step: u32) -> i64 {
        let w = self.w;
        let (pid, comm) = if w.loader_workers > 0 {
            let worker = (step % w.loader_workers) as i32 + 1;
            (self.ranks[r].pid + worker, "pt_data_worker")
        } else {
            (self.ranks[r].pid, "python")
        };
        for _ in 0..w.reads_per_step {
            let (file, offset) = if w.random {
                let file = self.rng.random_range(0..w.files);
                let slots = (w.file_size / w.read_size).max(1);
                (file, self.rng.random_range(0..slots) * w.read_size)
            } else {
                let st = &mut self.ranks[r];
                if st.offset + w.read_size > w.file_size {
                    st.file = (st.file + w.ranks) % w.files;
                    st.offset = 0;
                }
                let o = st.offset;
                st.offset += w.read_size;
                (st.file, o)
            };
            let path = format!("{}/shard-{file:05}.bin", w.data_dir);
            let fd = self.ranks[r].next_fd;
            self.ranks[r].next_fd = 10 + (fd - 9) % 64;
            self.row(
                r,
                pid,
                comm,
                t,
                8_000,
                Op::Open,
                &path,
                fd,
                None,
                None,
                fd as i64,
                Some(O_RDONLY),
            );
            t += 8_000;
            let d = self.io_ns(w.read_size, w.read_bps);
            self.row(
                r,
                pid,
                comm,
                t,
                d,
                Op::Read,
                &path,
                fd,
                Some(offset as i64),
                Some(w.read_size as i64),
                w.read_size as i64,
                None,
            );
            t += d;
            self.no_data_row(r, pid, comm, t, 3_000, Op::Close, &path, fd);
            t += 3_000;
        }
        let jitter = self.rng.random_range(0.97..1.03);
        t + (w.compute_ns as f64 * jitter) as i64
    }

    fn checkpoint_rank(&mut self, r: usize, mut t: i64, step: u32, c: &Checkpoint) -> i64 {
        let pid = self.ranks[r].pid;
        let path = format!(
            "{}/step-{step:06}/rank-{:05}.pt",
            c.dir,
            self.w.first_rank as usize + r
        );
        let fd = 7;
        self.row(
            r,
            pid,
            "python",
            t,
            30_000,
            Op::Open,
            &path,
            fd,
            None,
            None,
            fd as i64,
            Some(O_WRONLY_CREAT_TRUNC),
        );
        t += 30_000;
        let mut off = 0u64;
        while off < c.bytes_per_rank {
            let n = c.write_size.min(c.bytes_per_rank - off);
            let d = self.io_ns(n, self.w.write_bps);
            self.row(
                r,
                pid,
                "python",
                t,
                d,
                Op::Write,
                &path,
                fd,
                Some(off as i64),
                Some(n as i64),
                n as i64,
                None,
            );
            t += d;
            off += n;
        }
        if c.fsync {
            let d = self.io_ns(0, self.w.write_bps) * 10;
            self.no_data_row(r, pid, "python", t, d, Op::Fsync, &path, fd);
            t += d;
        }
        self.no_data_row(r, pid, "python", t, 5_000, Op::Close, &path, fd);
        t + 5_000
    }
}
