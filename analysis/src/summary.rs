//! Everything `summary` reports: totals, op mix, request-size histograms,
//! sequential versus random access, per-rank and per-file totals, peak
//! bandwidth and phases, from one parallel pass over the ten columns they
//! need and the files' roles (see [`crate::part_counters`], [`crate::roles`]). Memory grows with distinct files,
//! ranks and time windows, never with rows.
//!
//! `peak_read_gib_s` / `peak_write_gib_s` are over 1 s windows aligned to the
//! first event; the 100 ms peaks are in `peak_read_gib_s_100ms` /
//! `peak_write_gib_s_100ms`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

use arrow_array::Array;
use serde::Serialize;

use crate::access::AccessCounts;
use crate::histogram::SizeHistogram;
use crate::overview::{tally_with_roles, Overview};
use crate::part_counters::Depth;
pub use crate::part_counters::{FileStats, OpStats, RankStats};
use crate::requests_by_object::RequestTotals;
use crate::roles::{MountTotals, Role, RoleTotals};
use crate::timeline::BASE_WINDOW_NS;
use iorepro_format::error::TraceResult;
use iorepro_format::reader::TraceReader;
use iorepro_format::schema::{COL_HOST, COL_PID};
use iorepro_format::units::fmt_bytes;

/// How many files the summary lists, busiest first.
pub const TOP_FILES: usize = 10;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AccessShares {
    pub read: AccessCounts,
    pub write: AccessCounts,
    pub read_sequential_share: f64,
    pub write_sequential_share: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Events, duration, bytes, peaks and phases.
    #[serde(flatten)]
    pub overview: Overview,
    pub dropped_events: u64,
    pub hosts: Vec<String>,
    pub ranks: Vec<i32>,
    pub files: u64,
    pub ops: BTreeMap<String, OpStats>,
    /// Requested sizes (`size`) of read and write calls, power-of-two buckets.
    pub size_histogram: BTreeMap<String, SizeHistogram>,
    pub access: AccessShares,
    /// Every rank that appears, in rank order (rows without a rank are in `unranked_events`).
    pub per_rank: Vec<RankStats>,
    pub unranked_events: u64,
    /// Distinct processes (host and pid) of a trace in which no row has a
    /// rank (a job started without a launcher): what stands for the rank
    /// count there. Absent when rows have ranks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    pub top_files: Vec<FileStats>,
    /// Files, calls and bytes per role of the files (see [`crate::roles`]).
    pub roles: BTreeMap<Role, RoleTotals>,
    /// Files, calls and bytes per mount (file system) the files were on,
    /// busiest first; `unknown` in a trace without a mount table.
    pub mounts: Vec<MountTotals>,
    /// The job's object-storage requests (absent when it made none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestTotals>,
    /// Per save, what reached the device in the job's calls and by the
    /// kernel's write-back after it; absent where the trace does not say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub saves_on_device: Vec<crate::served::SaveOnDevice>,
}

impl Summary {
    pub fn compute(reader: &TraceReader) -> TraceResult<Summary> {
        let (mut t, roles) = tally_with_roles(reader, Depth::Full, BASE_WINDOW_NS)?;
        let mut overview = Overview::with_startup(&mut t, &roles);
        let follows_write_back = crate::served::follows_write_back(reader);
        if follows_write_back {
            // A capture that followed write-back and saw none: 0, not unknown.
            overview.storage_written_back_bytes.get_or_insert(0);
        }
        let saves_on_device =
            crate::served::saves_on_device(&overview.phases, &t.activity, follows_write_back);
        let mut hosts = t.hosts.clone();
        hosts.sort();
        let (per_rank, unranked_events) = t.ranks();
        let mut top_files = t.files();
        top_files.sort_by(|a, b| {
            (b.read_bytes + b.write_bytes)
                .cmp(&(a.read_bytes + a.write_bytes))
                .then(b.events.cmp(&a.events))
                .then(a.path.cmp(&b.path))
        });
        top_files.truncate(TOP_FILES);
        let (read, write) = t.access.counts();
        let processes = if per_rank.is_empty() {
            Some(processes(reader)?)
        } else {
            None
        };
        Ok(Summary {
            dropped_events: reader.manifest().dropped_events,
            hosts,
            ranks: per_rank.iter().map(|r| r.rank).collect(),
            files: t.file_count() as u64,
            ops: t
                .ops()
                .filter(|(_, s)| s.count > 0)
                .map(|(op, s)| (op.as_str().to_string(), s.clone()))
                .collect(),
            size_histogram: t
                .histograms()
                .filter(|(_, h)| h.total() > 0)
                .map(|(op, h)| (op.as_str().to_string(), h.clone()))
                .collect(),
            access: AccessShares {
                read,
                write,
                read_sequential_share: read.sequential_share(),
                write_sequential_share: write.sequential_share(),
            },
            per_rank,
            unranked_events,
            processes,
            top_files,
            roles: roles.totals().clone(),
            mounts: roles.per_mount(),
            requests: RequestTotals::compute(reader)?,
            saves_on_device,
            overview,
        })
    }
}

/// Distinct (host, pid) pairs of the trace's rows. A second pass, over two
/// columns, made only for a trace without ranks: the tally keeps no
/// processes, and a trace with ranks has its count there.
fn processes(reader: &TraceReader) -> TraceResult<u64> {
    let pids = TraceReader::open(reader.root())?.with_columns(&[COL_HOST, COL_PID]);
    let mut seen: HashMap<String, HashSet<i32>> = HashMap::new();
    for ev in pids.events()? {
        let ev = ev?;
        let pid = ev.pid();
        for row in (0..ev.len()).filter(|&row| pid.is_valid(row)) {
            let host = if ev.host().is_valid(row) {
                ev.host_at(row)
            } else {
                ""
            };
            if !seen.contains_key(host) {
                seen.insert(host.to_string(), HashSet::new());
            }
            seen.get_mut(host).unwrap().insert(pid.value(row));
        }
    }
    Ok(seen.values().map(|p| p.len() as u64).sum())
}

impl Summary {
    /// The ranks in the header: their count, or, without ranks, why and
    /// how many processes there are instead.
    fn ranks_line(&self) -> String {
        match self.processes {
            None => self.ranks.len().to_string(),
            Some(0) => "none".to_string(),
            Some(n) => format!("none (no launcher rank variables; {n} processes)"),
        }
    }

    /// The human-readable report: the totals, the op mix and request
    /// sizes, the busiest ranks and files, the roles and mounts, the phases.
    pub fn render(&self) -> String {
        let mut s = String::new();
        self.render_totals(&mut s);
        self.render_ops(&mut s);
        self.render_ranks(&mut s);
        self.render_files(&mut s);
        self.render_roles_and_mounts(&mut s);
        if let Some(requests) = &self.requests {
            s.push('\n');
            s.push_str(&requests.render());
        }
        s.push('\n');
        s.push_str(&crate::phases::render(&self.overview.phases));
        s.push_str(&crate::served::render(
            &self.overview,
            &self.saves_on_device,
        ));
        s
    }

    /// Events, bytes, peaks, metadata calls and how sequential the I/O is.
    fn render_totals(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "events {}  dropped {}  duration {:.3} s  hosts {}  ranks {}  files {}",
            self.overview.events,
            self.dropped_events,
            self.overview.duration_s,
            self.hosts.len(),
            self.ranks_line(),
            self.files
        );
        let _ = writeln!(
            s,
            "read {}  write {}",
            fmt_bytes(self.overview.read_bytes as f64),
            fmt_bytes(self.overview.write_bytes as f64)
        );
        let _ = writeln!(
            s,
            "peak read {:.3} GiB/s (1 s), {:.3} GiB/s (100 ms)   peak write {:.3} GiB/s (1 s), {:.3} GiB/s (100 ms)",
            self.overview.peak_read_gib_s, self.overview.peak_read_gib_s_100ms, self.overview.peak_write_gib_s, self.overview.peak_write_gib_s_100ms
        );
        let _ = writeln!(
            s,
            "metadata calls {}  {:.0}/s  peak {:.0}/s (1 s)",
            self.overview.metadata_calls,
            self.overview.metadata_calls_per_s,
            self.overview.peak_metadata_calls_per_s
        );
        let _ = writeln!(
            s,
            "sequential: reads {:.1} %, writes {:.1} %",
            self.access.read_sequential_share * 100.0,
            self.access.write_sequential_share * 100.0
        );
    }

    /// Calls and bytes per op, and each op's histogram of request sizes.
    fn render_ops(&self, s: &mut String) {
        let _ = writeln!(s, "\n{:<10} {:>12} {:>14}", "op", "count", "bytes");
        for (op, st) in &self.ops {
            let _ = writeln!(
                s,
                "{:<10} {:>12} {:>14}",
                op,
                st.count,
                fmt_bytes(st.bytes as f64)
            );
        }
        for (op, h) in &self.size_histogram {
            let _ = writeln!(s, "\n{op} sizes");
            let total = h.total().max(1) as f64;
            for (floor, count) in h.buckets() {
                let bar = "#".repeat(((count as f64 / total) * 40.0).ceil() as usize);
                let _ = writeln!(
                    s,
                    "  >= {:>10} {:>12}  {bar}",
                    fmt_bytes(floor as f64),
                    count
                );
            }
        }
    }

    /// The ranks that moved the most bytes.
    fn render_ranks(&self, s: &mut String) {
        // No table of ranks when there are none (the header says why).
        if !self.per_rank.is_empty() {
            let _ = writeln!(
                s,
                "\n{:<8} {:>12} {:>14} {:>14}",
                "rank", "events", "read", "write"
            );
        }
        let mut busiest: Vec<&RankStats> = self.per_rank.iter().collect();
        busiest.sort_by_key(|r| std::cmp::Reverse(r.read_bytes + r.write_bytes));
        for r in busiest.iter().take(TOP_FILES) {
            let _ = writeln!(
                s,
                "{:<8} {:>12} {:>14} {:>14}",
                r.rank,
                r.events,
                fmt_bytes(r.read_bytes as f64),
                fmt_bytes(r.write_bytes as f64)
            );
        }
        if self.per_rank.len() > TOP_FILES {
            let _ = writeln!(
                s,
                "  ... {} more ranks (--json lists all)",
                self.per_rank.len() - TOP_FILES
            );
        }
    }

    /// The files that moved the most bytes.
    fn render_files(&self, s: &mut String) {
        let _ = writeln!(s, "\n{:>14} {:>14} {:>10}  file", "read", "write", "events");
        for f in &self.top_files {
            let _ = writeln!(
                s,
                "{:>14} {:>14} {:>10}  {}",
                fmt_bytes(f.read_bytes as f64),
                fmt_bytes(f.write_bytes as f64),
                f.events,
                f.path
            );
        }
    }

    /// Files, calls and bytes per role and per mount.
    fn render_roles_and_mounts(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "\n{:<11} {:>8} {:>12} {:>14} {:>14}",
            "role", "files", "calls", "read", "write"
        );
        for (role, t) in &self.roles {
            let _ = writeln!(
                s,
                "{:<11} {:>8} {:>12} {:>14} {:>14}",
                role.as_str(),
                t.files,
                t.calls,
                fmt_bytes(t.read_bytes as f64),
                fmt_bytes(t.write_bytes as f64)
            );
        }
        let _ = writeln!(
            s,
            "\n{:<24} {:<10} {:>8} {:>12} {:>14} {:>14}",
            "mount", "type", "files", "calls", "read", "write"
        );
        for m in &self.mounts {
            let _ = writeln!(
                s,
                "{:<24} {:<10} {:>8} {:>12} {:>14} {:>14}",
                m.mount_point,
                m.fs_type,
                m.files,
                m.calls,
                fmt_bytes(m.read_bytes as f64),
                fmt_bytes(m.write_bytes as f64)
            );
        }
    }
}
