//! What a job asked of object storage: its request rows (op `request`,
//! see `iorepro_format::schema::COL_METHOD`) by method, and by object,
//! each object with a role as a file has one: a dataset object the job
//! read, a checkpoint it wrote (a checkpoint's name, or uploaded in parts),
//! another output it wrote.
//!
//! A trace without requests costs nothing here: the segments' footers say
//! whether any row has a method ([`TraceReader::may_hold_requests`]), and
//! only then are the request columns read.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::roles::names::looks_like_checkpoint;
use crate::roles::Role;
use iorepro_format::error::TraceResult;
use iorepro_format::object_requests::{Action, ObjectRequest};
use iorepro_format::reader::TraceReader;
use iorepro_format::schema::{
    COL_DUR_NS, COL_FIRST_BYTE_NS, COL_METHOD, COL_OP, COL_PATH, COL_RECEIVED, COL_SENT, COL_STATUS,
};
use iorepro_format::units::fmt_bytes;
use iorepro_format::Op;

/// How many objects the report lists, busiest first.
pub const TOP_OBJECTS: usize = 10;

/// The requests of one method.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MethodStats {
    pub count: u64,
    /// Answered with a status of 400 or above.
    pub failed: u64,
    /// Never answered (the connection closed, or the capture ended first).
    pub unanswered: u64,
    /// Body bytes the job sent, and received.
    pub sent_bytes: u64,
    pub received_bytes: u64,
    /// Time to the answer's last byte, median and 99th percentile.
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Time to the answer's first byte, median.
    pub first_byte_p50_ms: f64,
}

/// The requests on one object (its URL without the query).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ObjectStats {
    pub url: String,
    pub role: Role,
    pub requests: u64,
    pub read_bytes: u64,
    pub written_bytes: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RequestTotals {
    pub requests: u64,
    /// Body bytes the job received (a GET's object data, a listing).
    pub read_bytes: u64,
    /// Body bytes the job sent (a PUT's or a part's data).
    pub written_bytes: u64,
    pub methods: BTreeMap<String, MethodStats>,
    pub objects: u64,
    /// The objects that moved the most bytes, busiest first: the
    /// [`TOP_OBJECTS`] of a summary, or as many as asked
    /// ([`RequestTotals::compute_listing`]).
    pub top_objects: Vec<ObjectStats>,
    /// Objects and bytes per role.
    pub roles: BTreeMap<Role, (u64, u64, u64)>,
}

#[derive(Default)]
struct Object {
    requests: u64,
    read: u64,
    written: u64,
    parts: u64,
    /// Requests that listed the bucket (the URL is the bucket's).
    listings: u64,
}

#[derive(Default)]
struct Method {
    count: u64,
    failed: u64,
    unanswered: u64,
    sent: u64,
    received: u64,
    durations_ns: Vec<i64>,
    first_bytes_ns: Vec<i64>,
}

impl RequestTotals {
    /// The trace's requests, with its [`TOP_OBJECTS`] busiest objects;
    /// `None` when it has none.
    pub fn compute(reader: &TraceReader) -> TraceResult<Option<RequestTotals>> {
        Self::compute_listing(reader, TOP_OBJECTS)
    }

    /// The trace's requests, with up to `listed` objects, busiest first
    /// (`usize::MAX`: every one, as `iorepro-trace files` lists them).
    pub fn compute_listing(
        reader: &TraceReader,
        listed: usize,
    ) -> TraceResult<Option<RequestTotals>> {
        if !reader.may_hold_requests() {
            return Ok(None);
        }
        let reader = reader.clone().with_columns(&[
            COL_DUR_NS,
            COL_OP,
            COL_PATH,
            COL_METHOD,
            COL_STATUS,
            COL_FIRST_BYTE_NS,
            COL_SENT,
            COL_RECEIVED,
        ]);
        let mut methods: BTreeMap<String, Method> = BTreeMap::new();
        let mut objects: BTreeMap<String, Object> = BTreeMap::new();
        for batch in reader.events()? {
            let ev = batch?;
            for (i, op) in ev.ops().into_iter().enumerate() {
                if op != Op::Request {
                    continue;
                }
                let Some(x) = ev.exchange_at(i) else {
                    continue;
                };
                let m = methods.entry(x.method.to_string()).or_default();
                m.count += 1;
                m.failed += u64::from(x.status.is_some_and(|s| s >= 400));
                m.unanswered += u64::from(x.status.is_none());
                m.sent += x.sent.max(0) as u64;
                m.received += x.received.max(0) as u64;
                m.durations_ns.push(ev.dur_ns().value(i));
                m.first_bytes_ns.extend(x.first_byte_ns);
                let url = ev.path_at(i).unwrap_or_default();
                let object = url.split_once('?').map_or(url, |(o, _)| o);
                let action = ObjectRequest::parse(x.method, url).map(|r| r.action);
                let o = objects.entry(object.to_string()).or_default();
                o.requests += 1;
                o.read += x.received.max(0) as u64;
                o.written += x.sent.max(0) as u64;
                o.parts += u64::from(matches!(action, Some(Action::UploadPart { .. })));
                o.listings += u64::from(matches!(action, Some(Action::List { .. })));
            }
        }
        if methods.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self::from_parts(methods, objects, listed)))
    }

    fn from_parts(
        methods: BTreeMap<String, Method>,
        objects: BTreeMap<String, Object>,
        listed_max: usize,
    ) -> Self {
        let mut roles: BTreeMap<Role, (u64, u64, u64)> = BTreeMap::new();
        let mut listed: Vec<ObjectStats> = objects
            .into_iter()
            .map(|(url, o)| {
                let role = role_of(&url, &o);
                let r = roles.entry(role).or_default();
                r.0 += 1;
                r.1 += o.read;
                r.2 += o.written;
                ObjectStats {
                    url,
                    role,
                    requests: o.requests,
                    read_bytes: o.read,
                    written_bytes: o.written,
                }
            })
            .collect();
        let objects = listed.len() as u64;
        listed.sort_by(|a, b| {
            (b.read_bytes + b.written_bytes)
                .cmp(&(a.read_bytes + a.written_bytes))
                .then(b.requests.cmp(&a.requests))
                .then(a.url.cmp(&b.url))
        });
        listed.truncate(listed_max);
        let methods: BTreeMap<String, MethodStats> = methods
            .into_iter()
            .map(|(name, mut m)| {
                let stats = MethodStats {
                    count: m.count,
                    failed: m.failed,
                    unanswered: m.unanswered,
                    sent_bytes: m.sent,
                    received_bytes: m.received,
                    p50_ms: quantile_ms(&mut m.durations_ns, 0.5),
                    p99_ms: quantile_ms(&mut m.durations_ns, 0.99),
                    first_byte_p50_ms: quantile_ms(&mut m.first_bytes_ns, 0.5),
                };
                (name, stats)
            })
            .collect();
        RequestTotals {
            requests: methods.values().map(|m| m.count).sum(),
            read_bytes: methods.values().map(|m| m.received_bytes).sum(),
            written_bytes: methods.values().map(|m| m.sent_bytes).sum(),
            methods,
            objects,
            top_objects: listed,
            roles,
        }
    }

    /// The report's section: totals, methods, the busiest objects, roles.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "object requests {}  objects {}  read {}  written {}",
            self.requests,
            self.objects,
            fmt_bytes(self.read_bytes as f64),
            fmt_bytes(self.written_bytes as f64)
        );
        let _ = writeln!(
            s,
            "{:<8} {:>9} {:>7} {:>12} {:>12} {:>9} {:>9} {:>11}",
            "method", "requests", "failed", "sent", "received", "p50 ms", "p99 ms", "1st byte ms"
        );
        for (name, m) in &self.methods {
            let _ = writeln!(
                s,
                "{:<8} {:>9} {:>7} {:>12} {:>12} {:>9.2} {:>9.2} {:>11.2}",
                name,
                m.count,
                m.failed,
                fmt_bytes(m.sent_bytes as f64),
                fmt_bytes(m.received_bytes as f64),
                m.p50_ms,
                m.p99_ms,
                m.first_byte_p50_ms
            );
        }
        s.push('\n');
        s.push_str(&self.render_objects());
        s
    }

    /// The objects listed, one line each: bytes each way, requests, role, URL.
    pub fn render_objects(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:>12} {:>12} {:>9}  {:<11} object",
            "read", "written", "requests", "role"
        );
        for o in &self.top_objects {
            let _ = writeln!(
                s,
                "{:>12} {:>12} {:>9}  {:<11} {}",
                fmt_bytes(o.read_bytes as f64),
                fmt_bytes(o.written_bytes as f64),
                o.requests,
                o.role.as_str(),
                o.url
            );
        }
        if self.objects > self.top_objects.len() as u64 {
            let _ = writeln!(
                s,
                "  ... {} more objects (`iorepro-trace files` lists them all)",
                self.objects - self.top_objects.len() as u64
            );
        }
        s
    }
}

/// An object's role: written, it is a checkpoint when its name says so or
/// it went up in parts, another output otherwise; read only, a dataset
/// object; neither (looked at, deleted), or a bucket listed, other.
fn role_of(url: &str, o: &Object) -> Role {
    if o.listings > 0 {
        Role::Other
    } else if o.written > 0 {
        if o.parts > 0 || looks_like_checkpoint(url) {
            Role::Checkpoint
        } else {
            Role::Output
        }
    } else if o.read > 0 {
        Role::Dataset
    } else {
        Role::Other
    }
}

fn quantile_ms(values: &mut [i64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_unstable();
    let at = ((values.len() - 1) as f64 * q).round() as usize;
    values[at] as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_take_their_roles_from_what_the_job_did_with_them() {
        let o = |read, written, parts| Object {
            requests: 1,
            read,
            written,
            parts,
            listings: 0,
        };
        let url = "http://s3/b/run/state.bin";
        assert_eq!(role_of(url, &o(0, 5 << 20, 2)), Role::Checkpoint);
        assert_eq!(
            role_of("http://s3/b/ckpt/model.pt", &o(0, 9, 0)),
            Role::Checkpoint
        );
        assert_eq!(role_of(url, &o(0, 9, 0)), Role::Output);
        assert_eq!(role_of(url, &o(4096, 0, 0)), Role::Dataset);
        assert_eq!(role_of(url, &o(0, 0, 0)), Role::Other);
        let listed = Object {
            listings: 1,
            ..o(4229, 0, 0)
        };
        assert_eq!(role_of("http://s3/b", &listed), Role::Other);
    }

    #[test]
    fn quantiles_are_of_the_sorted_values() {
        let mut v = vec![5_000_000, 1_000_000, 3_000_000];
        assert_eq!(quantile_ms(&mut v, 0.5), 3.0);
        assert_eq!(quantile_ms(&mut v, 0.99), 5.0);
        assert_eq!(quantile_ms(&mut [], 0.5), 0.0);
    }
}
